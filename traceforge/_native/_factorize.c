/* Codes of 64-bit values in order of first appearance: pandas.factorize for the pattern
 * mining (analyses/patterns/mining.py) without importing pandas (~0.35 s a process).
 *
 * factorize(values, codes, first) -> number of distinct values. `values` is a buffer of
 * 8-byte items (uint64 or int64); `codes` and `first` are writable int64 buffers as long
 * (numpy's index type: ufunc.at takes its fast path only with it). Code k is the k-th
 * distinct value met, and first[k] the index where it is first met. A table with open addressing holds the distinct values only, kept
 * at most half full; the GIL is released while it is filled.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint64_t value;
    int64_t code;  /* -1: an empty slot */
} Slot;

static inline size_t slot_of(uint64_t value, size_t mask) {
    return (size_t)((value * 0x9E3779B97F4A7C15ULL) >> 32) & mask;  /* names are small ints: mix them */
}

/* The table doubled, its entries placed again; NULL when out of memory (the old one is kept). */
static Slot *grown(Slot *table, size_t cap) {
    size_t new_cap = 2 * cap, mask = new_cap - 1;
    Slot *bigger = PyMem_RawMalloc(new_cap * sizeof(Slot));
    if (!bigger) return NULL;
    memset(bigger, 0xff, new_cap * sizeof(Slot));  /* code -1 everywhere */
    for (size_t i = 0; i < cap; i++) {
        if (table[i].code < 0) continue;
        size_t j = slot_of(table[i].value, mask);
        while (bigger[j].code >= 0) j = (j + 1) & mask;
        bigger[j] = table[i];
    }
    PyMem_RawFree(table);
    return bigger;
}

static PyObject *factorize(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *values_obj, *codes_obj, *first_obj;
    if (!PyArg_ParseTuple(args, "OOO", &values_obj, &codes_obj, &first_obj)) return NULL;
    Py_buffer values, codes, first;
    if (PyObject_GetBuffer(values_obj, &values, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(codes_obj, &codes, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&values);
        return NULL;
    }
    if (PyObject_GetBuffer(first_obj, &first, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&values);
        PyBuffer_Release(&codes);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n = values.len / 8;
    if (values.len % 8 || codes.len != n * 8 || first.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "values, codes and first must be 8-byte items, as many");
        goto done;
    }
    size_t cap = 1024;
    Slot *table = PyMem_RawMalloc(cap * sizeof(Slot));
    if (!table) { PyErr_NoMemory(); goto done; }
    memset(table, 0xff, cap * sizeof(Slot));
    const uint64_t *v = values.buf;
    int64_t *out = codes.buf, *first_at = first.buf;
    int64_t distinct = 0;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        size_t mask = cap - 1, j = slot_of(v[i], mask);
        while (table[j].code >= 0 && table[j].value != v[i]) j = (j + 1) & mask;
        if (table[j].code < 0) {
            first_at[distinct] = i;
            table[j] = (Slot){v[i], distinct++};
            if ((size_t)distinct * 2 > cap) {
                Slot *bigger = grown(table, cap);
                if (!bigger) { failed = 1; break; }
                table = bigger;
                cap *= 2;
            }
            out[i] = distinct - 1;
        } else {
            out[i] = table[j].code;
        }
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(table);
    if (failed) { PyErr_NoMemory(); goto done; }
    result = PyLong_FromLongLong(distinct);
done:
    PyBuffer_Release(&values);
    PyBuffer_Release(&codes);
    PyBuffer_Release(&first);
    return result;
}

static PyMethodDef methods[] = {
    {"factorize", factorize, METH_VARARGS,
     "factorize(values, codes, first) -> distinct count (codes by first appearance, first index of each)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_factorize", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__factorize(void) { return PyModule_Create(&module); }
