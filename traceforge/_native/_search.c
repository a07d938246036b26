/* Searches of sorted int arrays: numpy.searchsorted for int32 and int64, galloping from the
 * previous answer (see traceforge/search.py), and the greedy choice of non-overlapping windows.
 *
 * The analyses look up columns in file order (times that mostly rise, by a few places of the
 * sorted array at a time); numpy bisects the whole rest of the array for each, ~20 probes
 * spread over MBs. Here each search starts where the last one ended and doubles its step
 * away from there, so a nearby answer costs a few probes in cache; any order stays correct.
 *
 * search_sorted(haystack, needles, itemsize, right, out): haystack sorted ascending, needles
 * of the same type (int32 or int64: itemsize 4 or 8), out an intp buffer as long as needles.
 * out[i] = the first index whose value is >= needles[i] (> with right), len(haystack) if
 * none. The GIL is released while it runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Is the answer for x at or before index i? (hay[i] >= x, or > x with right) */
#define BEYOND(i) (right ? hay[i] > x : hay[i] >= x)

/* gallop_<T>: the answer for x, searched from `hint` outwards by doubling steps, then bisected. */
#define DEFINE_GALLOP(T)                                                                          \
    static Py_ssize_t gallop_##T(const T *hay, Py_ssize_t n, T x, int right, Py_ssize_t hint) {   \
        Py_ssize_t lo, hi; /* the answer is in [lo, hi]; hi == n means "past the end" */          \
        if (hint < n && !BEYOND(hint)) { /* further on */                                         \
            lo = hint + 1;                                                                        \
            hi = n;                                                                               \
            for (Py_ssize_t step = 1; lo + step - 1 < n; step <<= 1) {                            \
                Py_ssize_t probe = lo + step - 1;                                                 \
                if (BEYOND(probe)) { hi = probe; break; }                                         \
                lo = probe + 1;                                                                   \
            }                                                                                     \
        } else { /* at the hint or before it */                                                   \
            lo = 0;                                                                               \
            hi = hint;                                                                            \
            for (Py_ssize_t step = 1; hi - step >= 0; step <<= 1) {                               \
                Py_ssize_t probe = hi - step;                                                     \
                if (!BEYOND(probe)) { lo = probe + 1; break; }                                    \
                hi = probe;                                                                       \
            }                                                                                     \
        }                                                                                         \
        while (lo < hi) {                                                                         \
            Py_ssize_t mid = lo + (hi - lo) / 2;                                                  \
            if (BEYOND(mid)) hi = mid;                                                            \
            else lo = mid + 1;                                                                    \
        }                                                                                         \
        return lo;                                                                                \
    }

DEFINE_GALLOP(int32_t)
DEFINE_GALLOP(int64_t)

static PyObject *search_sorted(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer haystack, needles, out;
    int itemsize, right;
    if (!PyArg_ParseTuple(args, "y*y*ipw*", &haystack, &needles, &itemsize, &right, &out)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = haystack.len / (itemsize ? itemsize : 1), m = needles.len / (itemsize ? itemsize : 1);
    if ((itemsize != 4 && itemsize != 8) || haystack.len % itemsize || needles.len % itemsize ||
        out.len != m * (Py_ssize_t)sizeof(Py_ssize_t)) {
        PyErr_SetString(PyExc_ValueError, "haystack and needles must be int32 or int64 buffers (itemsize 4 or 8), "
                        "out an intp buffer as long as needles");
        goto done;
    }
    Py_ssize_t *o = out.buf, at = 0;
    Py_BEGIN_ALLOW_THREADS
    if (itemsize == 4) {
        const int32_t *hay = haystack.buf, *v = needles.buf;
        for (Py_ssize_t i = 0; i < m; i++) o[i] = at = gallop_int32_t(hay, n, v[i], right, at);
    } else {
        const int64_t *hay = haystack.buf, *v = needles.buf;
        for (Py_ssize_t i = 0; i < m; i++) o[i] = at = gallop_int64_t(hay, n, v[i], right, at);
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&haystack);
    PyBuffer_Release(&needles);
    PyBuffer_Release(&out);
    return result;
}

/* non_overlapping(starts, n, out) -> count: the starts (int64, ascending) of windows of n kept
 * left to right, each one that begins at or after the end of the last kept, into out (int64,
 * as long as starts). A loop over every start, in Python the pattern miner's largest step. */
static PyObject *non_overlapping(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer starts, out;
    long long n;
    if (!PyArg_ParseTuple(args, "y*Lw*", &starts, &n, &out)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t m = starts.len / 8, kept = 0;
    if (starts.len % 8 || out.len != starts.len) {
        PyErr_SetString(PyExc_ValueError, "starts and out must be int64 buffers of one length");
        goto done;
    }
    const int64_t *s = starts.buf;
    int64_t *o = out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < m; i++) {
        if (kept && s[i] < o[kept - 1] + n) continue;
        o[kept++] = s[i];
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(kept);
done:
    PyBuffer_Release(&starts);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"search_sorted", search_sorted, METH_VARARGS,
     "search_sorted(haystack, needles, itemsize, right, out): numpy.searchsorted of needles in a sorted haystack "
     "(both int32 or both int64: itemsize 4 or 8) into out (intp), each search galloping from the previous answer"},
    {"non_overlapping", non_overlapping, METH_VARARGS,
     "non_overlapping(starts, n, out) -> count: the ascending int64 starts of windows of n kept left to right "
     "when each begins at or after the last kept one's end, written to out (int64, as long as starts)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_search", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__search(void) { return PyModule_Create(&module); }
