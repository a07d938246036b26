/* Counter events as JSON text, a chunk of points at a time.
 *
 * An annotated trace gains millions of counter points (queue length, utilisation,
 * bandwidth); formatting each in Python costs about a microsecond. Here each point is
 *     head + ts (ns written as exact us) + middle + value (an int scaled by 10^decimals) + tail
 * and points are joined by ",\n". Numbers are written exactly, trailing fraction zeros
 * dropped (1500 ns -> 1.5), as exacttime.ns_to_us_text does. fixed_point_texts writes such
 * numbers alone, one after another, with where each ends (ids and times of flow events; args
 * members, a key before each number).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* v / 10^decimals in decimal, exactly; returns the bytes written (at most 22). */
static Py_ssize_t fixed_point(char *out, int64_t v, int decimals, uint64_t scale) {
    char digits[24];
    char *p = out;
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    uint64_t whole = mag / scale, frac = mag % scale;
    if (v < 0) *p++ = '-';
    int n = 0;
    do { digits[n++] = (char)('0' + whole % 10); whole /= 10; } while (whole);
    while (n) *p++ = digits[--n];
    if (frac) {
        *p++ = '.';
        for (int i = decimals - 1; i >= 0; i--) { digits[i] = (char)('0' + frac % 10); frac /= 10; }
        int last = decimals;
        while (digits[last - 1] == '0') last--;
        memcpy(p, digits, last);
        p += last;
    }
    return p - out;
}

static PyObject *counter_events(PyObject *self, PyObject *args) {
    Py_buffer head, middle, tail, ts, values;
    int decimals;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*i", &head, &middle, &tail, &ts, &values, &decimals)) return NULL;
    PyObject *out = NULL;
    Py_ssize_t n = ts.len / 8;
    if (ts.len % 8 || values.len != ts.len || decimals < 0 || decimals > 18) {
        PyErr_SetString(PyExc_ValueError, "ts and values must be int64 arrays of one length; decimals 0..18");
        goto done;
    }
    uint64_t scale = 1;
    for (int i = 0; i < decimals; i++) scale *= 10;
    Py_ssize_t fixed = head.len + middle.len + tail.len + 2 + 2 * 24;
    out = PyBytes_FromStringAndSize(NULL, n ? n * fixed : 0);
    if (!out || !n) goto done;
    char *p = PyBytes_AS_STRING(out);
    const int64_t *t = ts.buf, *v = values.buf;
    Py_BEGIN_ALLOW_THREADS  /* the compression thread's Python steps run meanwhile */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i) { *p++ = ','; *p++ = '\n'; }
        memcpy(p, head.buf, head.len); p += head.len;
        p += fixed_point(p, t[i], 3, 1000);
        memcpy(p, middle.buf, middle.len); p += middle.len;
        p += fixed_point(p, v[i], decimals, scale);
        memcpy(p, tail.buf, tail.len); p += tail.len;
    }
    Py_END_ALLOW_THREADS
    _PyBytes_Resize(&out, p - PyBytes_AS_STRING(out));
done:
    PyBuffer_Release(&head);
    PyBuffer_Release(&middle);
    PyBuffer_Release(&tail);
    PyBuffer_Release(&ts);
    PyBuffer_Release(&values);
    return out;
}

static PyObject *fixed_point_texts(PyObject *self, PyObject *args) {
    Py_buffer values, prefix = {0};
    int decimals, real = 0;
    if (!PyArg_ParseTuple(args, "y*i|y*p", &values, &decimals, &prefix, &real)) return NULL;
    PyObject *blob = NULL, *ends = NULL, *out = NULL;
    Py_ssize_t n = values.len / 8;
    if (values.len % 8 || decimals < 0 || decimals > 18) {
        PyErr_SetString(PyExc_ValueError, "values must be an int64 array; decimals 0..18");
        goto done;
    }
    uint64_t scale = 1;
    for (int i = 0; i < decimals; i++) scale *= 10;
    blob = PyBytes_FromStringAndSize(NULL, n * (24 + prefix.len));
    ends = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!blob || !ends) goto done;
    char *start = PyBytes_AS_STRING(blob), *p = start;
    int64_t *e = (int64_t *)PyBytes_AS_STRING(ends);
    const int64_t *v = values.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (prefix.len) { memcpy(p, prefix.buf, prefix.len); p += prefix.len; }
        p += fixed_point(p, v[i], decimals, scale);
        if (real && v[i] % (int64_t)scale == 0) { *p++ = '.'; *p++ = '0'; }
        e[i] = p - start;
    }
    Py_END_ALLOW_THREADS
    if (_PyBytes_Resize(&blob, p - start) == 0) out = PyTuple_Pack(2, blob, ends);
done:
    Py_XDECREF(blob);
    Py_XDECREF(ends);
    PyBuffer_Release(&values);
    if (prefix.obj) PyBuffer_Release(&prefix);
    return out;
}

static PyMethodDef methods[] = {
    {"counter_events", counter_events, METH_VARARGS,
     "counter_events(head, middle, tail, ts_ns, values, decimals) -> points as JSON events joined by ',\\n'"},
    {"fixed_point_texts", fixed_point_texts, METH_VARARGS,
     "fixed_point_texts(values, decimals, prefix=b'', real=False) -> (the texts of values / 10^decimals joined, "
     "each after prefix and, if real, whole ones with '.0' (as a float prints), their end offsets as int64 bytes)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_counter_text", NULL, -1, methods};

PyMODINIT_FUNC PyInit__counter_text(void) { return PyModule_Create(&module); }
