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
#include "portable.h"

/* "00" .. "99": two digits per division (a 16-digit ts in µs is most of a point's cost). */
static const char PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* v < 10^8 as exactly eight digits, zero-padded: two independent halves, few dependent divisions. */
static inline void eight_digits(char *out, uint32_t v) {
    uint32_t hi = v / 10000, lo = v % 10000;
    memcpy(out, PAIRS + 2 * (hi / 100), 2);
    memcpy(out + 2, PAIRS + 2 * (hi % 100), 2);
    memcpy(out + 4, PAIRS + 2 * (lo / 100), 2);
    memcpy(out + 6, PAIRS + 2 * (lo % 100), 2);
}

/* v as exactly `width` (1..20) digits, zero-padded (v < 10^width). */
static inline void padded_digits(char *out, uint64_t v, int width) {
    char buf[24];
    if (width <= 8) {
        eight_digits(buf, (uint32_t)v);
    } else {
        eight_digits(buf + 16, (uint32_t)(v % 100000000));
        v /= 100000000;
        eight_digits(buf + 8, (uint32_t)(v % 100000000));
        eight_digits(buf, (uint32_t)(v / 100000000));  /* < 1845 */
    }
    memcpy(out, buf + (width <= 8 ? 8 : 24) - width, width);
}

static const uint64_t POW10[20] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL, 100000000ULL, 1000000000ULL,
    10000000000ULL, 100000000000ULL, 1000000000000ULL, 10000000000000ULL, 100000000000000ULL,
    1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL, 1000000000000000000ULL,
    10000000000000000000ULL};

/* How many decimal digits v has (1 for 0): log10 from the bit length (x 1233/4096), then one compare. */
static inline int digit_count(uint64_t v) {
    if (v < 10) return 1;
    int t = ((64 - tf_clz64(v)) * 1233) >> 12;
    return t + (v >= POW10[t]);
}

/* The digits of a whole number above its last eight, as last written: the numbers of a column
 * mostly share them (1683564901548726 us: "16835649" changes every 100 s). */
typedef struct {
    uint64_t high;  /* whole / 10^8; UINT64_MAX before the first */
    int len;
    char text[12];  /* high < 1.85e11 */
} HighDigits;

/* whole in decimal at p (room for 20 bytes); returns the count. */
static inline int whole_digits(char *p, uint64_t whole, HighDigits *seen) {
    if (whole < 100) {  /* counts, percentages */
        memcpy(p, PAIRS + 2 * whole + (whole < 10), 2);
        return 2 - (whole < 10);
    }
    if (whole < 100000000) {
        int n = digit_count(whole);
        padded_digits(p, whole, n);
        return n;
    }
    uint64_t high = whole / 100000000;
    if (high != seen->high) {
        seen->high = high;
        seen->len = digit_count(high);
        padded_digits(seen->text, high, seen->len);
    }
    memcpy(p, seen->text, sizeof seen->text);  /* a fixed size: one move, the rest overwritten */
    eight_digits(p + seen->len, (uint32_t)(whole % 100000000));
    return seen->len + 8;
}

/* v / 10^decimals in decimal, exactly; returns the bytes written (at most 22). ``seen``
 * carries the high digits from one number of a column to the next. */
static Py_ssize_t fixed_point(char *out, int64_t v, int decimals, uint64_t scale, HighDigits *seen) {
    char *p = out;
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    uint64_t whole = mag / scale, frac = mag % scale;
    if (v < 0) *p++ = '-';
    p += whole_digits(p, whole, seen);
    if (frac) {
        *p++ = '.';
        padded_digits(p, frac, decimals);
        int last = decimals;
        while (p[last - 1] == '0') last--;
        p += last;
    }
    return p - out;
}

static PyObject *counter_events(PyObject *self, PyObject *args) {
    (void)self;
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
    HighDigits seen_ts = {UINT64_MAX, 0, {0}}, seen_value = {UINT64_MAX, 0, {0}};
    Py_BEGIN_ALLOW_THREADS  /* the compression thread's Python steps run meanwhile */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i) { *p++ = ','; *p++ = '\n'; }
        memcpy(p, head.buf, head.len); p += head.len;
        p += fixed_point(p, t[i], 3, 1000, &seen_ts);
        memcpy(p, middle.buf, middle.len); p += middle.len;
        p += fixed_point(p, v[i], decimals, scale, &seen_value);
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
    (void)self;
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
    HighDigits seen = {UINT64_MAX, 0, {0}};
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (prefix.len) { memcpy(p, prefix.buf, prefix.len); p += prefix.len; }
        p += fixed_point(p, v[i], decimals, scale, &seen);
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

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_counter_text", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__counter_text(void) { return PyModule_Create(&module); }
