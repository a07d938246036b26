/* The replay of `check` (check/replay.py): slices and flows in Perfetto's order.
 *
 * Perfetto's importer keeps a stack of open slices per thread track and binds flow events
 * to the top of it; which slices spill, which B events end early and which arrows are
 * dropped depends on that order alone, so it is walked once, sequentially. As a Python
 * loop the walk took ~1 µs an event (half of `check` on a Kineto trace). This walks the
 * same rules over the columns and writes what it finds as (rule, row, other row) triples;
 * check/replay.py turns them into findings. The rules follow trace_processor's
 * slice_tracker.cc and flow_tracker.cc, including where they pop the top of the stack
 * rather than the slice they looked at (see check/replay.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { SLICE, BEGIN, END, FLOW_START, FLOW_STEP, FLOW_END, FLOW_END_NEXT };  /* row kinds */
enum { V2_BEGIN, V2_STEP, V2_END };                                          /* v2 flow modes */
enum { SPILL, MAX_DEPTH_EXCEEDED, MISPLACED_END, NO_ENCLOSING_SLICE, DUPLICATE_ID,
       END_WITHOUT_START, STEP_WITHOUT_START, END_FROM_SLICE_0 };           /* what is found */
#define MAX_DEPTH 512

typedef struct {
    int64_t start, row;
    __int128 end;  /* start + dur exactly (both int64) */
    int open;      /* a B whose E has not come: no end yet */
} Entry;

typedef struct { Entry *items; Py_ssize_t len, cap; } Stack;
typedef struct { int64_t *items; Py_ssize_t len, cap; } Ints;  /* also (fid, row) pairs */

typedef struct {
    const int8_t *kind;
    const int64_t *ts, *dur;
    const int32_t *fid;    /* v1 flows: Perfetto's dense flow id (-1 on other rows) */
    const int32_t *track, *name, *cat;
    Py_ssize_t n_v2;
    const int64_t *v2_row, *v2_fid;
    const int8_t *v2_mode;
    Stack *stacks;
    Ints *pending;   /* per track: (v1 flow id, row) of f events without bp, waiting for a slice */
    uint8_t *dense;  /* v1 flow ids 0 .. n_dense - 1 that have a source slice */
    uint64_t n_dense;
    uint64_t *sparse;  /* other ids with one (v2 bind_ids), open addressing; 0 marks empty */
    Py_ssize_t sparse_cap, sparse_len;
    int has_zero;      /* id 0 among the sparse ones (only when n_dense is 0) */
    Ints out;          /* (rule, row, other) triples */
    int failed;
} Replay;

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

static void found(Replay *r, int rule, int64_t row, int64_t other) {
    if (push_int(&r->out, rule) < 0 || push_int(&r->out, row) < 0 || push_int(&r->out, other) < 0) r->failed = 1;
}

/* -- flow ids with a source slice ------------------------------------------------------- */

static inline Py_ssize_t sparse_slot(const Replay *r, uint64_t fid) {
    uint64_t h = fid * 0x9E3779B97F4A7C15ULL;
    Py_ssize_t j = (Py_ssize_t)(h >> 20) & (r->sparse_cap - 1);
    while (r->sparse[j] && r->sparse[j] != fid) j = (j + 1) & (r->sparse_cap - 1);
    return j;
}

static int started(const Replay *r, uint64_t fid) {
    if (fid < r->n_dense) return r->dense[fid];
    if (!fid) return r->has_zero;
    return r->sparse_cap && r->sparse[sparse_slot(r, fid)] == fid;
}

static void start_flow(Replay *r, uint64_t fid) {
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

/* -- slices ----------------------------------------------------------------------------- */

/* Pops slices that ended by ts; the row of the slice [ts, ts + dur) partially overlaps, or
 * -1 (slice_tracker.cc MaybeCloseStack). has_dur 0: a B or an E. */
static int64_t close_stack(Replay *r, Stack *st, int64_t ts, int has_dur, int64_t dur, int64_t row) {
    int open_descendant = 0;
    for (Py_ssize_t i = st->len - 1; i >= 0; i--) {
        Entry *e = &st->items[i];
        if (e->open) {
            open_descendant = 1;
        } else if (open_descendant) {
            if (ts > e->end) {
                found(r, MISPLACED_END, row, e->row);
                st->len = i;
                open_descendant = 0;
            }
        } else if (e->end < ts || (e->end == ts && !(e->end == e->start && has_dur && dur == 0))) {
            st->len--;  /* the top, whichever slice was looked at */
        } else if (has_dur && ts < e->end && e->end < (__int128)ts + dur) {
            return e->row;
        }
    }
    return -1;
}

static void bind_pending(Replay *r, int32_t track) {
    Ints *p = &r->pending[track];
    for (Py_ssize_t i = 0; i < p->len; i += 2) {
        uint64_t fid = (uint64_t)p->items[i];
        if (!started(r, fid)) {
            start_flow(r, fid);
            found(r, END_FROM_SLICE_0, p->items[i + 1], -1);
        }
    }
    p->len = 0;
}

static void start_slice(Replay *r, int32_t track, int64_t ts, int has_dur, int64_t dur, int64_t row) {
    Stack *st = &r->stacks[track];
    if (st->len) {
        int64_t over = close_stack(r, st, ts, has_dur, dur, row);
        if (over >= 0) { found(r, SPILL, row, over); return; }
    }
    if (st->len >= MAX_DEPTH) { found(r, MAX_DEPTH_EXCEEDED, row, st->items[st->len - 1].row); return; }
    if (st->len == st->cap) {
        Py_ssize_t cap = st->cap ? 2 * st->cap : 8;
        Entry *grown = PyMem_RawRealloc(st->items, cap * sizeof(Entry));
        if (!grown) { r->failed = 1; return; }
        st->items = grown;
        st->cap = cap;
    }
    Entry *e = &st->items[st->len++];
    e->start = ts;
    e->end = has_dur ? (__int128)ts + dur : 0;
    e->open = !has_dur;
    e->row = row;
    if (r->pending[track].len) bind_pending(r, track);
}

/* An E: closes the innermost open B with its name (and cat, if given). */
static void end_slice(Replay *r, int32_t track, int64_t ts, int64_t row) {
    Stack *st = &r->stacks[track];
    if (!st->len) return;
    close_stack(r, st, ts, 0, 0, row);
    int32_t name = r->name[row], cat = r->cat[row];
    for (Py_ssize_t i = st->len - 1; i >= 0; i--) {
        Entry *e = &st->items[i];
        if (!e->open) continue;
        if (cat >= 0 && r->cat[e->row] != cat) continue;
        if (name >= 0 && r->name[e->row] >= 0 && r->name[e->row] != name) continue;
        e->end = ts;
        e->open = 0;
        if (i == st->len - 1) st->len--;
        return;
    }
}

/* -- flows ------------------------------------------------------------------------------ */

static void flow_begin(Replay *r, int32_t track, uint64_t fid, int64_t row) {
    if (!r->stacks[track].len) found(r, NO_ENCLOSING_SLICE, row, -1);
    else if (started(r, fid)) found(r, DUPLICATE_ID, row, -1);
    else start_flow(r, fid);
}

static void flow_end(Replay *r, int32_t track, uint64_t fid, int64_t row, int unstarted) {
    if (!r->stacks[track].len) found(r, NO_ENCLOSING_SLICE, row, -1);
    else if (!started(r, fid)) found(r, unstarted, row, -1);
}

static void flow_v1(Replay *r, int kind, int32_t track, uint64_t fid, int64_t row) {
    if (kind == FLOW_END_NEXT) {
        Ints *p = &r->pending[track];
        if (push_int(p, (int64_t)fid) < 0 || push_int(p, row) < 0) r->failed = 1;
    } else if (kind == FLOW_START) {
        flow_begin(r, track, fid, row);
    } else {
        flow_end(r, track, fid, row, kind == FLOW_STEP ? STEP_WITHOUT_START : END_WITHOUT_START);
    }
}

/* The v2 flow a slice row carries (bind_id), if any: index into v2_row (sorted), else -1. */
static Py_ssize_t v2_of(const Replay *r, int64_t row) {
    Py_ssize_t lo = 0, hi = r->n_v2;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (r->v2_row[mid] < row) lo = mid + 1; else hi = mid;
    }
    return lo < r->n_v2 && r->v2_row[lo] == row ? lo : -1;
}

static void walk(Replay *r, const int64_t *order, Py_ssize_t n, int slices_only) {
    for (Py_ssize_t j = 0; j < n && !r->failed; j++) {
        int64_t row = order[j];
        int kind = r->kind[row];
        int32_t track = r->track[row];
        if (kind == SLICE) start_slice(r, track, r->ts[row], 1, r->dur[row], row);
        else if (kind == BEGIN) start_slice(r, track, r->ts[row], 0, 0, row);
        else if (kind == END) end_slice(r, track, r->ts[row], row);
        else { flow_v1(r, kind, track, (uint64_t)r->fid[row], row); continue; }
        if (slices_only || !r->n_v2) continue;
        Py_ssize_t v = v2_of(r, row);
        if (v < 0) continue;
        uint64_t fid = (uint64_t)r->v2_fid[v];
        if (r->v2_mode[v] == V2_BEGIN) flow_begin(r, track, fid, row);
        else flow_end(r, track, fid, row, r->v2_mode[v] == V2_STEP ? STEP_WITHOUT_START : END_WITHOUT_START);
    }
}

/* -- Python ----------------------------------------------------------------------------- */

enum { ORDER, KIND, TS, DUR, TRACK, FID, NAME, CAT, V2_ROW, V2_FID, V2_MODE, N_ARRAYS };
static const Py_ssize_t ITEM[N_ARRAYS] = {8, 1, 8, 8, 4, 4, 4, 4, 8, 8, 1};

static PyObject *replay(PyObject *self, PyObject *args) {
    PyObject *objs[N_ARRAYS];
    Py_ssize_t n_tracks, n_dense;
    int slices_only;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOnnp", &objs[ORDER], &objs[KIND], &objs[TS], &objs[DUR], &objs[TRACK],
                          &objs[FID], &objs[NAME], &objs[CAT], &objs[V2_ROW], &objs[V2_FID], &objs[V2_MODE],
                          &n_tracks, &n_dense, &slices_only))
        return NULL;
    Py_buffer v[N_ARRAYS];
    int held = 0;
    PyObject *result = NULL;
    Replay r = {0};
    for (; held < N_ARRAYS; held++) {
        if (PyObject_GetBuffer(objs[held], &v[held], PyBUF_SIMPLE) < 0) goto done;
        if (v[held].len % ITEM[held]) { PyErr_SetString(PyExc_ValueError, "replay: array of the wrong item size"); held++; goto done; }
    }
    Py_ssize_t n = v[ORDER].len / 8, rows = v[KIND].len, n_v2 = v[V2_ROW].len / 8;
    for (int k = TS; k <= CAT; k++) {
        if (v[k].len / ITEM[k] != rows) { PyErr_SetString(PyExc_ValueError, "replay: columns of different lengths"); goto done; }
    }
    if (v[V2_FID].len / 8 != n_v2 || v[V2_MODE].len != n_v2 || n_tracks < 0 || n_dense < 0) {
        PyErr_SetString(PyExc_ValueError, "replay: bad v2 arrays or counts");
        goto done;
    }
    const int64_t *order = v[ORDER].buf;
    const int32_t *track = v[TRACK].buf;
    for (Py_ssize_t j = 0; j < n; j++) {
        if (order[j] < 0 || order[j] >= rows || track[order[j]] < 0 || track[order[j]] >= n_tracks) {
            PyErr_SetString(PyExc_ValueError, "replay: a row or track out of range");
            goto done;
        }
    }
    r.kind = v[KIND].buf; r.ts = v[TS].buf; r.dur = v[DUR].buf; r.track = track; r.fid = v[FID].buf;
    r.name = v[NAME].buf; r.cat = v[CAT].buf;
    r.n_v2 = n_v2; r.v2_row = v[V2_ROW].buf; r.v2_fid = v[V2_FID].buf; r.v2_mode = v[V2_MODE].buf;
    r.n_dense = (uint64_t)n_dense;
    r.stacks = PyMem_RawCalloc(n_tracks ? n_tracks : 1, sizeof(Stack));
    r.pending = PyMem_RawCalloc(n_tracks ? n_tracks : 1, sizeof(Ints));
    r.dense = PyMem_RawCalloc(n_dense ? n_dense : 1, 1);
    if (!r.stacks || !r.pending || !r.dense) { PyErr_NoMemory(); goto done; }
    Py_BEGIN_ALLOW_THREADS
    walk(&r, order, n, slices_only);
    Py_END_ALLOW_THREADS
    if (r.failed) { PyErr_NoMemory(); goto done; }
    result = PyBytes_FromStringAndSize((const char *)r.out.items, r.out.len * (Py_ssize_t)sizeof(int64_t));
done:
    for (Py_ssize_t t = 0; r.stacks && t < n_tracks; t++) PyMem_RawFree(r.stacks[t].items);
    for (Py_ssize_t t = 0; r.pending && t < n_tracks; t++) PyMem_RawFree(r.pending[t].items);
    PyMem_RawFree(r.stacks);
    PyMem_RawFree(r.pending);
    PyMem_RawFree(r.dense);
    PyMem_RawFree(r.sparse);
    PyMem_RawFree(r.out.items);
    while (held-- > 0) PyBuffer_Release(&v[held]);
    return result;
}

static PyMethodDef methods[] = {
    {"replay", replay, METH_VARARGS,
     "replay(order, kind, ts, dur, track, fid, name, cat, v2_row, v2_fid, v2_mode, n_tracks, n_dense, slices_only)"
     " -> bytes of int64 (rule, row, other row) triples, in the order found"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_replay", NULL, -1, methods};

PyMODINIT_FUNC PyInit__replay(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    static const struct { const char *name; long value; } constants[] = {
        {"SPILL", SPILL}, {"MAX_DEPTH_EXCEEDED", MAX_DEPTH_EXCEEDED}, {"MISPLACED_END", MISPLACED_END},
        {"NO_ENCLOSING_SLICE", NO_ENCLOSING_SLICE}, {"DUPLICATE_ID", DUPLICATE_ID},
        {"END_WITHOUT_START", END_WITHOUT_START}, {"STEP_WITHOUT_START", STEP_WITHOUT_START},
        {"END_FROM_SLICE_0", END_FROM_SLICE_0}, {"MAX_DEPTH", MAX_DEPTH},
    };
    for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++)
        if (PyModule_AddIntConstant(m, constants[i].name, constants[i].value) < 0) return NULL;
    return m;
}
