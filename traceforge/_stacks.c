/* The stack walk that nests one thread's CPU ops and launch calls (analyses/stacks.py).
 *
 * Python sorts the items; this walks them in that order with an array as the stack. The
 * walk is sequential by nature, and as a Python loop it took ~1 s per 5 M items.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    int64_t end;
    int32_t row;
} Open;

enum { ORDER, ROWS, TS, NEG_DUR, LEAF, PARENT, N_ARRAYS };

static PyObject *nest(PyObject *self, PyObject *args) {
    PyObject *objs[N_ARRAYS];
    Py_ssize_t dur_size;
    if (!PyArg_ParseTuple(args, "OOOOnOO", &objs[ORDER], &objs[ROWS], &objs[TS], &objs[NEG_DUR], &dur_size,
                          &objs[LEAF], &objs[PARENT]))
        return NULL;
    if (dur_size != 4 && dur_size != 8) return PyErr_Format(PyExc_ValueError, "durations must be int32 or int64");
    const Py_ssize_t itemsize[N_ARRAYS] = {8, 4, 8, dur_size, 1, 4};
    Py_buffer v[N_ARRAYS];
    int held = 0;
    PyObject *result = NULL;
    for (; held < N_ARRAYS; held++) {
        if (PyObject_GetBuffer(objs[held], &v[held], held == PARENT ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0) goto done;
        if (v[held].len % itemsize[held]) {
            PyBuffer_Release(&v[held]);
            PyErr_SetString(PyExc_ValueError, "an array of the wrong item size");
            goto done;
        }
    }
    Py_ssize_t n = v[ORDER].len / 8, n_parent = v[PARENT].len / 4;
    for (int a = ROWS; a <= LEAF; a++) {
        if (v[a].len / itemsize[a] != n) {
            PyErr_SetString(PyExc_ValueError, "order, rows, ts, neg_dur and leaf must be equally long");
            goto done;
        }
    }
    const int64_t *order = v[ORDER].buf, *ts = v[TS].buf, *d8 = v[NEG_DUR].buf;
    const int32_t *rows = v[ROWS].buf, *d4 = v[NEG_DUR].buf;
    const int8_t *leaf = v[LEAF].buf;
    int32_t *parent = v[PARENT].buf;
    Open *stack = PyMem_RawMalloc((n ? n : 1) * sizeof(Open));  /* (end, row) of the open ops, innermost last */
    if (!stack) { PyErr_NoMemory(); goto done; }
    Py_ssize_t depth = 0, bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t i = order[k];
        if (i < 0 || i >= n || rows[i] < 0 || rows[i] >= n_parent) { bad = k; break; }
        int64_t start = ts[i], stop = start - (dur_size == 4 ? (int64_t)d4[i] : d8[i]);
        /* The top contains this one iff it starts inside the top and ends by the top's end. */
        while (depth && !(start < stack[depth - 1].end && stop <= stack[depth - 1].end)) depth--;
        if (depth) parent[rows[i]] = stack[depth - 1].row;
        if (!leaf[i] && stop > start) stack[depth++] = (Open){stop, rows[i]};
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(stack);
    if (bad >= 0) {
        PyErr_Format(PyExc_IndexError, "order or rows out of range at item %zd", bad);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    while (held > 0) PyBuffer_Release(&v[--held]);
    return result;
}

static PyMethodDef methods[] = {
    {"nest", nest, METH_VARARGS,
     "nest(order, rows, ts, neg_dur, dur_itemsize, leaf, parent): walk items order[0], order[1], ... (int64) and "
     "set parent[rows[i]] (int32) to the row of the innermost open op that contains item i (start ts[i], end "
     "ts[i] - neg_dur[i]); items with leaf[i] (int8) never open. rows: int32; ts: int64; neg_dur: int32 or int64"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_stacks", NULL, -1, methods};

PyMODINIT_FUNC PyInit__stacks(void) { return PyModule_Create(&module); }
