/* Nesting one thread's CPU ops and launch calls (analyses/structure/stacks.py): sort, then walk.
 * nest_sorted walks items already sorted, from a stack left by the items before them, for
 * export's windows of start times (analyses/structure/export_tables.py).
 *
 * The items are sorted as indices into the thread's row lists, reading times and durations
 * from the trace's columns: 8 bytes an item (an index and a merge buffer). Gathering each
 * thread's times and durations for a numpy lexsort held ~35 bytes an item, the largest
 * working set of `launch-stats` and `patterns --op` (one thread holds nearly every item).
 * A thread's ops, and its calls, are nearly in time order in the file, so a merge sort of
 * the runs already in order does a few passes. The walk is sequential by nature: as a
 * Python loop it took ~1 s per 5 M items.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Item k of a thread: its op k (k < n_ops), else its launch call k - n_ops. */
typedef struct {
    const int32_t *ops, *calls;
    Py_ssize_t n_ops;
    const int64_t *op_ts, *call_ts;
    const char *op_dur, *call_dur;
    int op_dur8, call_dur8; /* durations are int64 (else int32) */
} Thread;

static inline int64_t dur_at(const char *dur, int wide, int32_t row) {
    int64_t d = wide ? ((const int64_t *)dur)[row] : ((const int32_t *)dur)[row];
    return d > 0 ? d : 0;
}

static inline int64_t item_ts(const Thread *t, int32_t k) {
    return k < t->n_ops ? t->op_ts[t->ops[k]] : t->call_ts[t->calls[k - t->n_ops]];
}

static inline int64_t item_dur(const Thread *t, int32_t k) {
    return k < t->n_ops ? dur_at(t->op_dur, t->op_dur8, t->ops[k])
                        : dur_at(t->call_dur, t->call_dur8, t->calls[k - t->n_ops]);
}

/* Whether item a sorts before item b: earlier start, then longer (a parent before what it
 * holds), then ops before calls and file order, which k is. A total order: no ties. */
static inline int before(const Thread *t, int32_t a, int32_t b) {
    int64_t ta = item_ts(t, a), tb = item_ts(t, b);
    if (ta != tb) return ta < tb;
    int64_t da = item_dur(t, a), db = item_dur(t, b);
    if (da != db) return da > db;
    return a < b;
}

/* Sorts idx[0..m) with tmp[0..m): finds the runs in order, then merges neighbours until one
 * is left. Returns 0 if out of memory (for the run bounds: more than a few only on input in
 * no order at all). */
static int sort_items(const Thread *t, int32_t *idx, int32_t *tmp, Py_ssize_t m) {
    Py_ssize_t cap = 64, runs = 0;
    Py_ssize_t *bound = PyMem_RawMalloc(cap * sizeof(Py_ssize_t)); /* run r is [bound[r], bound[r + 1]) */
    if (!bound) return 0;
    bound[0] = 0;
    for (Py_ssize_t i = 1; i <= m; i++) {
        if (i < m && before(t, idx[i - 1], idx[i])) continue;
        if (runs + 2 > cap) {
            Py_ssize_t *grown = PyMem_RawRealloc(bound, 2 * cap * sizeof(Py_ssize_t));
            if (!grown) { PyMem_RawFree(bound); return 0; }
            bound = grown, cap *= 2;
        }
        bound[++runs] = i;
    }
    int32_t *src = idx, *dst = tmp;
    while (runs > 1) {
        Py_ssize_t kept = 0;
        for (Py_ssize_t r = 0; r < runs; r += 2) {
            Py_ssize_t lo = bound[r], mid = bound[r + 1], hi = r + 2 <= runs ? bound[r + 2] : mid;
            Py_ssize_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) dst[k++] = before(t, src[j], src[i]) ? src[j++] : src[i++];
            memcpy(dst + k, src + i, (mid - i) * sizeof(int32_t));
            memcpy(dst + k + (mid - i), src + j, (hi - j) * sizeof(int32_t));
            bound[kept++] = lo;
        }
        bound[kept] = m;
        runs = kept;
        int32_t *swap = src;
        src = dst, dst = swap;
    }
    if (src != idx) memcpy(idx, src, m * sizeof(int32_t));
    PyMem_RawFree(bound);
    return 1;
}

typedef struct {
    int64_t end;
    int32_t row;
    int32_t zero;  /* 0: the stack nest_sorted returns has no padding bytes of unknown value */
} Open;

/* The next item in sorted order, [start, stop): pops the open ops that do not hold it (start
 * inside, end by their end), pushes it if it opens (an op, not a call, of positive duration)
 * and returns the row of its parent, the innermost op holding it (-1 none). */
static inline int32_t nest_step(Open *stack, Py_ssize_t *depth, int64_t start, int64_t stop, int opens, int32_t row) {
    Py_ssize_t d = *depth;
    while (d && !(start < stack[d - 1].end && stop <= stack[d - 1].end)) d--;
    int32_t parent = d ? stack[d - 1].row : -1;
    if (opens && stop > start) stack[d++] = (Open){stop, row, 0};
    *depth = d;
    return parent;
}

/* Walks the sorted items with an array as the stack of open ops. */
static void walk(const Thread *t, const int32_t *idx, Py_ssize_t m, Py_ssize_t n_cpu, int32_t *parent, Open *stack) {
    Py_ssize_t depth = 0;
    for (Py_ssize_t s = 0; s < m; s++) {
        int32_t k = idx[s];
        int64_t start = item_ts(t, k);
        int is_call = k >= t->n_ops;
        int32_t row = is_call ? (int32_t)(n_cpu + t->calls[k - t->n_ops]) : t->ops[k];
        int32_t holder = nest_step(stack, &depth, start, start + item_dur(t, k), !is_call, row);
        if (holder >= 0) parent[row] = holder;
    }
}

enum { OPS, CALLS, OP_TS, OP_DUR, CALL_TS, CALL_DUR, PARENT, N_ARRAYS };

/* Whether every row in v (int32) is in [0, n). */
static int rows_within(const Py_buffer *v, Py_ssize_t n) {
    const int32_t *r = v->buf;
    for (Py_ssize_t i = 0; i < v->len / 4; i++)
        if (r[i] < 0 || r[i] >= n) return 0;
    return 1;
}

static PyObject *nest_thread(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[N_ARRAYS];
    Py_ssize_t op_dur_size, call_dur_size;
    if (!PyArg_ParseTuple(args, "OOOOnOOnO", &objs[OPS], &objs[CALLS], &objs[OP_TS], &objs[OP_DUR], &op_dur_size,
                          &objs[CALL_TS], &objs[CALL_DUR], &call_dur_size, &objs[PARENT]))
        return NULL;
    if ((op_dur_size != 4 && op_dur_size != 8) || (call_dur_size != 4 && call_dur_size != 8))
        return PyErr_Format(PyExc_ValueError, "durations must be int32 or int64");
    const Py_ssize_t itemsize[N_ARRAYS] = {4, 4, 8, op_dur_size, 8, call_dur_size, 4};
    Py_buffer v[N_ARRAYS];
    int held = 0;
    PyObject *result = NULL;
    int32_t *idx = NULL, *tmp = NULL;
    Open *stack = NULL;
    for (; held < N_ARRAYS; held++) {
        if (PyObject_GetBuffer(objs[held], &v[held], held == PARENT ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0) goto done;
        if (v[held].len % itemsize[held]) {
            PyBuffer_Release(&v[held]);
            PyErr_SetString(PyExc_ValueError, "an array of the wrong item size");
            goto done;
        }
    }
    Py_ssize_t n_ops = v[OPS].len / 4, n_calls = v[CALLS].len / 4, n_cpu = v[OP_TS].len / 8;
    Py_ssize_t n_launch = v[CALL_TS].len / 8, m = n_ops + n_calls;
    if (v[OP_DUR].len / op_dur_size != n_cpu || v[CALL_DUR].len / call_dur_size != n_launch ||
        v[PARENT].len / 4 != n_cpu + n_launch || n_cpu + n_launch > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "ts and durations must match, parent hold a row (int32) per op and call");
        goto done;
    }
    if (!rows_within(&v[OPS], n_cpu) || !rows_within(&v[CALLS], n_launch)) {
        PyErr_SetString(PyExc_IndexError, "an op or call row is out of range");
        goto done;
    }
    Thread t = {v[OPS].buf, v[CALLS].buf, n_ops, v[OP_TS].buf, v[CALL_TS].buf, v[OP_DUR].buf, v[CALL_DUR].buf,
                op_dur_size == 8, call_dur_size == 8};
    idx = PyMem_RawMalloc((m ? m : 1) * sizeof(int32_t));
    tmp = PyMem_RawMalloc((m ? m : 1) * sizeof(int32_t));
    stack = PyMem_RawMalloc((n_ops ? n_ops : 1) * sizeof(Open)); /* as deep as ops nest: pages used only so far */
    if (!idx || !tmp || !stack) { PyErr_NoMemory(); goto done; }
    int sorted;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < m; k++) idx[k] = (int32_t)k;
    sorted = sort_items(&t, idx, tmp, m);
    if (sorted) walk(&t, idx, m, n_cpu, v[PARENT].buf, stack);
    Py_END_ALLOW_THREADS
    if (!sorted) { PyErr_NoMemory(); goto done; }
    result = Py_NewRef(Py_None);
done:
    PyMem_RawFree(idx);
    PyMem_RawFree(tmp);
    PyMem_RawFree(stack);
    while (held > 0) PyBuffer_Release(&v[--held]);
    return result;
}

/* nest_sorted(start, stop, opens, ids, holder, stack) -> stack: see the method's doc. */
static PyObject *nest_sorted(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer start, stop, opens, ids, holder, carried;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*y*", &start, &stop, &opens, &ids, &holder, &carried)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = start.len / 8, depth = carried.len / (Py_ssize_t)sizeof(Open);
    Open *stack = NULL;
    if (stop.len != n * 8 || opens.len != n || ids.len != n * 4 || holder.len != n * 4 ||
        carried.len % (Py_ssize_t)sizeof(Open)) {
        PyErr_SetString(PyExc_ValueError, "start/stop: int64, opens: a byte, ids/holder: int32 per item; "
                                          "stack: as returned");
        goto done;
    }
    stack = PyMem_RawMalloc((depth + n + 1) * sizeof(Open));
    if (!stack) { PyErr_NoMemory(); goto done; }
    memcpy(stack, carried.buf, carried.len);
    const int64_t *s0 = start.buf, *s1 = stop.buf;
    const char *o = opens.buf;
    const int32_t *id = ids.buf;
    int32_t *out = holder.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) out[i] = nest_step(stack, &depth, s0[i], s1[i], o[i], id[i]);
    Py_END_ALLOW_THREADS
    result = PyBytes_FromStringAndSize((const char *)stack, depth * sizeof(Open));
done:
    PyMem_RawFree(stack);
    PyBuffer_Release(&start); PyBuffer_Release(&stop); PyBuffer_Release(&opens);
    PyBuffer_Release(&ids); PyBuffer_Release(&holder); PyBuffer_Release(&carried);
    return result;
}

static PyMethodDef methods[] = {
    {"nest_thread", nest_thread, METH_VARARGS,
     "nest_thread(ops, calls, op_ts, op_dur, op_dur_itemsize, call_ts, call_dur, call_dur_itemsize, parent): one "
     "thread's ops (int32 rows of op_ts/op_dur) and launch calls (int32 rows of call_ts/call_dur), each in file "
     "order, sorted by start, longer first, ops before calls, file order; set parent[item] (int32; ops' rows, then "
     "calls' rows after len(op_ts)) to the row of the innermost op holding it (start ts, end ts + max(dur, 0)). "
     "ts: int64; durations: int32 or int64"},
    {"nest_sorted", nest_sorted, METH_VARARGS,
     "nest_sorted(start, stop, opens, ids, holder, stack) -> stack: one thread's next items, already in nesting "
     "order ([start, stop) int64, stop = start + max(dur, 0); opens: uint8/bool, 1 for an op; ids: int32), walked "
     "from the open ops `stack` left by the items before them (b'' for none); sets holder[i] (int32) to the id of "
     "the innermost op holding item i (-1 none) and returns the open ops after the last item, for the next call"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_stacks", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__stacks(void) { return PyModule_Create(&module); }
