/* Byte strings made of slices of a few buffers, substring tests over many spans, and
 * buffers to fill.
 *
 * The second read of an annotate run adds args to about every GPU op: a few hundred
 * insertions per reader batch. Done with a bytes object and a Python call per event, that
 * was a Python step per insertion; here the pieces come as columns (numpy arrays of starts and
 * lengths) and one call copies them, with the GIL released.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include "portable.h"

typedef struct {
    Py_ssize_t n;
    Py_buffer *views;
} Buffers;

static void release(Buffers *b) {
    for (Py_ssize_t i = 0; i < b->n; i++) PyBuffer_Release(&b->views[i]);
    PyMem_Free(b->views);
    b->views = NULL;  /* released: the callers' clean-up may call this again */
    b->n = 0;
}

/* Buffer views of every item of a sequence of bytes-like objects; 0 on failure (error set). */
static int get_buffers(PyObject *seq, Buffers *b) {
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of bytes-like objects");
    if (!fast) return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    b->n = 0;
    b->views = PyMem_Calloc(n ? n : 1, sizeof(Py_buffer));
    if (!b->views) { Py_DECREF(fast); PyErr_NoMemory(); return 0; }
    for (; b->n < n; b->n++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(fast, b->n), &b->views[b->n], PyBUF_SIMPLE) < 0) {
            release(b);
            Py_DECREF(fast);
            return 0;
        }
    }
    Py_DECREF(fast);
    return 1;
}

/* Row by row, the non-empty texts of some parts joined by a separator. A part is a buffer
 * and either its slices (int64 starts and lengths, one per row) or nothing (the whole buffer
 * on every row). Read straight from the parts' columns: describing each piece in index
 * arrays first wrote ~50 bytes per piece, more than most pieces are long. */
static PyObject *join_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *blobs_arg, *columns_arg, *fast = NULL, *out = NULL, *row_lengths = NULL;
    Py_ssize_t rows;
    Py_buffer sep;
    if (!PyArg_ParseTuple(args, "OOny*", &blobs_arg, &columns_arg, &rows, &sep)) return NULL;
    Buffers blobs = {0, NULL}, columns = {0, NULL};
    const int64_t **starts = NULL, **lengths = NULL;
    if (!get_buffers(blobs_arg, &blobs)) goto done;
    fast = PySequence_Fast(columns_arg, "columns: a sequence of (starts, lengths) or None per part");
    if (!fast) goto done;
    Py_ssize_t n = blobs.n;
    starts = PyMem_Calloc(n ? n : 1, sizeof *starts);
    lengths = PyMem_Calloc(n ? n : 1, sizeof *lengths);
    columns.views = PyMem_Calloc(2 * (n ? n : 1), sizeof(Py_buffer));
    if (!starts || !lengths || !columns.views) { PyErr_NoMemory(); goto done; }
    if (PySequence_Fast_GET_SIZE(fast) != n) {
        PyErr_SetString(PyExc_ValueError, "one columns entry per part");
        goto done;
    }
    for (Py_ssize_t p = 0; p < n; p++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, p);
        if (item == Py_None) continue;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "columns: a (starts, lengths) tuple or None per part");
            goto done;
        }
        for (int k = 0; k < 2; k++) {
            if (PyObject_GetBuffer(PyTuple_GET_ITEM(item, k), &columns.views[columns.n], PyBUF_SIMPLE) < 0)
                goto done;
            if (columns.views[columns.n++].len != rows * 8) {
                PyErr_SetString(PyExc_ValueError, "starts and lengths must be int64 arrays of one length a row");
                goto done;
            }
        }
        starts[p] = columns.views[columns.n - 2].buf;
        lengths[p] = columns.views[columns.n - 1].buf;
    }
    row_lengths = PyBytes_FromStringAndSize(NULL, rows * 8);
    if (!row_lengths) goto done;
    int64_t *row_length = (int64_t *)PyBytes_AS_STRING(row_lengths);
    Py_ssize_t total = 0;
    for (Py_ssize_t r = 0; r < rows; r++) {
        int64_t length = 0, seps = 0;
        for (Py_ssize_t p = 0; p < n; p++) {
            int64_t s = starts[p] ? starts[p][r] : 0, l = lengths[p] ? lengths[p][r] : blobs.views[p].len;
            if (s < 0 || l < 0 || s > blobs.views[p].len || l > blobs.views[p].len - s) {
                PyErr_Format(PyExc_IndexError, "row %zd of part %zd (start %lld, length %lld) is out of bounds",
                             r, p, (long long)s, (long long)l);
                goto done;
            }
            if (l) {
                length += l + (seps ? sep.len : 0);
                seps = 1;
            }
        }
        row_length[r] = length;
        total += length;
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (!out) goto done;
    char *o = PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < rows; r++) {
        int first = 1;
        for (Py_ssize_t p = 0; p < n; p++) {
            int64_t l = lengths[p] ? lengths[p][r] : blobs.views[p].len;
            if (!l) continue;
            if (!first && sep.len) { memcpy(o, sep.buf, sep.len); o += sep.len; }
            memcpy(o, (const char *)blobs.views[p].buf + (starts[p] ? starts[p][r] : 0), l);
            o += l;
            first = 0;
        }
    }
    Py_END_ALLOW_THREADS
done:
    Py_XDECREF(fast);
    if (blobs.views) release(&blobs);
    if (columns.views) release(&columns);
    PyMem_Free(starts);
    PyMem_Free(lengths);
    PyBuffer_Release(&sep);
    if (!out) { Py_XDECREF(row_lengths); return NULL; }
    return Py_BuildValue("(NN)", out, row_lengths);
}

/* Needles that all begin with one byte (the new keys: '"' then the name): one pass over a
 * span finds each place that byte is, and only there are the needles whose second byte
 * follows compared. Several memmem calls per span read it once per needle. */
#define MAX_SECONDS 4

typedef struct {
    unsigned char first;
    uint8_t second[256];  /* 1 where some needle's second byte is this */
    unsigned char seconds[MAX_SECONDS];  /* those bytes, when there are at most MAX_SECONDS */
    int nseconds;  /* how many; 0 when more */
    int avx2;  /* search with AVX2 (have_avx2 when the call began) */
} Anchor;

#ifdef TF_HAVE_AVX2_PATH
static int cpu_avx2;   /* the CPU (and OS) can run AVX2: set when the module loads */
static int have_avx2;  /* the AVX2 search is used: cpu_avx2, unless turned off */
#endif

static int anchor_of(const Buffers *needles, Anchor *a) {
    memset(a->second, 0, sizeof a->second);
    a->nseconds = 0;
#ifdef TF_HAVE_AVX2_PATH
    a->avx2 = have_avx2;  /* read with the GIL held: set_avx2 may change it meanwhile */
#else
    a->avx2 = 0;
#endif
    if (!needles->n) return 0;
    a->first = ((const unsigned char *)needles->views[0].buf)[0];
    int distinct = 0;
    for (Py_ssize_t k = 0; k < needles->n; k++) {
        const unsigned char *nk = needles->views[k].buf;
        if (needles->views[k].len < 2 || nk[0] != a->first) return 0;
        if (!a->second[nk[1]]) {
            if (distinct < MAX_SECONDS) a->seconds[distinct] = nk[1];
            distinct++;
        }
        a->second[nk[1]] = 1;
    }
    a->nseconds = distinct <= MAX_SECONDS ? distinct : 0;
    return 1;
}

/* Whether a needle starts at b[j] (b[j] is the needles' first byte). */
static inline int needle_at(const unsigned char *b, Py_ssize_t n, Py_ssize_t j, const Anchor *a,
                            const Buffers *needles) {
    if (j + 1 >= n || !a->second[b[j + 1]]) return 0;
    for (Py_ssize_t k = 0; k < needles->n; k++) {
        Py_ssize_t len = needles->views[k].len;
        if (len <= n - j && memcmp(b + j, needles->views[k].buf, len) == 0) return 1;
    }
    return 0;
}

#ifdef TF_HAVE_AVX2_PATH
/* 32 bytes a step, and only where the first byte is followed by a needle's second: a quote
 * opens every string and key, but few keys begin like the new ones. Returns the offset up
 * to which b was searched (a multiple of 32) or -1 when a needle was found. */
TF_TARGET_AVX2 static Py_ssize_t anchored_avx2(const unsigned char *b, Py_ssize_t n, const Anchor *a,
                                              const Buffers *needles) {
    const __m256i first = _mm256_set1_epi8((char)a->first);
    __m256i second[MAX_SECONDS];
    for (int k = 0; k < a->nseconds; k++) second[k] = _mm256_set1_epi8((char)a->seconds[k]);
    Py_ssize_t i = 0;
    for (; i + 33 <= n; i += 32) {
        __m256i next = _mm256_loadu_si256((const __m256i *)(b + i + 1));
        __m256i follows = _mm256_cmpeq_epi8(next, second[0]);
        for (int k = 1; k < a->nseconds; k++) follows = _mm256_or_si256(follows, _mm256_cmpeq_epi8(next, second[k]));
        __m256i at = _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(b + i)), first);
        unsigned mask = (unsigned)_mm256_movemask_epi8(_mm256_and_si256(at, follows));
        for (; mask; mask &= mask - 1)
            if (needle_at(b, n, i + tf_ctz32(mask), a, needles)) return -1;
    }
    return i;
}
#endif

static int span_has_anchored(const unsigned char *b, Py_ssize_t n, const Anchor *a, const Buffers *needles) {
    Py_ssize_t i = 0;
#ifdef TF_HAVE_AVX2_PATH
    if (a->avx2 && a->nseconds) {
        i = anchored_avx2(b, n, a, needles);
        if (i < 0) return 1;
    }
#endif
#ifdef TF_HAVE_SSE2
    const __m128i first = _mm_set1_epi8((char)a->first);
    for (; i + 16 <= n; i += 16) {
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(b + i)), first));
        for (; mask; mask &= mask - 1)
            if (needle_at(b, n, i + tf_ctz32(mask), a, needles)) return 1;
    }
#endif
    for (; i < n; i++)
        if (b[i] == a->first && needle_at(b, n, i, a, needles)) return 1;
    return 0;
}

static int span_has(const unsigned char *b, Py_ssize_t n, const Buffers *needles) {
    for (Py_ssize_t k = 0; k < needles->n; k++)
        if (tf_memmem(b, (size_t)n, needles->views[k].buf, (size_t)needles->views[k].len)) return 1;
    return 0;
}

/* Whether one of the needles occurs wholly inside b[0:n] (by the anchor where there is one). */
static inline int span_has_needle(const unsigned char *b, Py_ssize_t n, int anchored, const Anchor *a,
                                  const Buffers *needles) {
    return anchored ? span_has_anchored(b, n, a, needles) : span_has(b, n, needles);
}

static PyObject *spans_containing(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, starts, stops;
    PyObject *needles_arg;
    if (!PyArg_ParseTuple(args, "y*y*y*O", &data, &starts, &stops, &needles_arg)) return NULL;
    PyObject *out = NULL;
    Buffers needles = {0, NULL};
    Py_ssize_t n = starts.len / 8;
    if (starts.len % 8 || stops.len != starts.len) {
        PyErr_SetString(PyExc_ValueError, "starts and stops must be int64 arrays of one length");
        goto done;
    }
    if (!get_buffers(needles_arg, &needles)) goto done;
    const int64_t *a = starts.buf, *b = stops.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (a[i] < 0 || a[i] > b[i] || b[i] > data.len) {
            PyErr_Format(PyExc_IndexError, "span %zd [%lld, %lld) is out of bounds", i, (long long)a[i], (long long)b[i]);
            goto done;
        }
    }
    out = PyBytes_FromStringAndSize(NULL, n);
    if (!out) goto done;
    char *found = PyBytes_AS_STRING(out);
    Anchor anchor;
    int anchored = anchor_of(&needles, &anchor);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *span = (const unsigned char *)data.buf + a[i];
        Py_ssize_t len = b[i] - a[i];
        found[i] = span_has_needle(span, len, anchored, &anchor, &needles);
    }
    Py_END_ALLOW_THREADS
done:
    if (needles.views) release(&needles);
    PyBuffer_Release(&data);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&stops);
    return out;
}

/* Whether body b[0:n] (members "k":v,...) has needle k as a member's name: k followed by ':'
 * (after JSON whitespace). */
static int body_adds(const unsigned char *b, Py_ssize_t n, const Py_buffer *k) {
    const unsigned char *end = b + n;
    while (b < end) {
        const unsigned char *at = tf_memmem(b, (size_t)(end - b), k->buf, (size_t)k->len);
        if (!at) return 0;
        const unsigned char *c = at + k->len;
        while (c < end && (*c == ' ' || *c == '\t' || *c == '\n' || *c == '\r')) c++;
        if (c < end && *c == ':') return 1;
        b = at + 1;
    }
    return 0;
}

/* Whether a needle the body adds occurs in span b[0:n] (a key met that only other events get
 * does not matter: the members go in after the event's own). */
static int own_needle_met(const unsigned char *b, Py_ssize_t n, const unsigned char *body, Py_ssize_t body_len,
                          const Buffers *needles) {
    for (Py_ssize_t k = 0; k < needles->n; k++)
        if (body_adds(body, body_len, &needles->views[k]) &&
            tf_memmem(b, (size_t)n, needles->views[k].buf, (size_t)needles->views[k].len))
            return 1;
    return 0;
}

/* The common case of adding members to events' args, in one pass: each event is checked
 * for the new keys and copied with its members while it is in cache. None where an event
 * needs more (its args' place unknown, or a key met before it): the caller's general path. */
static PyObject *insert_members(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, starts, at, empty, blob, body_starts, body_lengths;
    PyObject *needles_arg;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*O", &data, &starts, &at, &empty, &blob, &body_starts, &body_lengths,
                          &needles_arg))
        return NULL;
    PyObject *out = NULL;
    Buffers needles = {0, NULL};
    Py_ssize_t n = starts.len / 8;
    if (starts.len % 8 || at.len != starts.len || body_starts.len != starts.len || body_lengths.len != starts.len ||
        empty.len != n) {
        PyErr_SetString(PyExc_ValueError, "starts, at, body_starts, body_lengths (int64) and empty (bool) must have "
                        "one length");
        goto done;
    }
    if (!get_buffers(needles_arg, &needles)) goto done;
    const int64_t *s = starts.buf, *a = at.buf, *bs = body_starts.buf, *bl = body_lengths.buf;
    const uint8_t *e = empty.buf;
    Py_ssize_t total = data.len, pos = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!bl[i]) continue;
        if (a[i] < 0) { out = Py_NewRef(Py_None); goto done; }
        if (s[i] < pos || a[i] < s[i] || a[i] > data.len || bs[i] < 0 || bl[i] < 0 || bs[i] > blob.len ||
            bl[i] > blob.len - bs[i]) {
            PyErr_Format(PyExc_IndexError, "event %zd (start %lld, args at %lld) is out of order or bounds", i,
                         (long long)s[i], (long long)a[i]);
            goto done;
        }
        pos = a[i];
        total += bl[i] + (e[i] ? 0 : 2);
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (!out) goto done;
    char *o = PyBytes_AS_STRING(out);
    const char *raw = data.buf, *text = blob.buf;
    Anchor anchor;
    int anchored = anchor_of(&needles, &anchor), clash = 0;
    Py_BEGIN_ALLOW_THREADS
    pos = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!bl[i]) continue;
        if (span_has_needle((const unsigned char *)raw + s[i], a[i] - s[i], anchored, &anchor, &needles) &&
            own_needle_met((const unsigned char *)raw + s[i], a[i] - s[i], (const unsigned char *)text + bs[i], bl[i],
                           &needles)) {
            clash = 1;
            break;
        }
        memcpy(o, raw + pos, a[i] - pos);
        o += a[i] - pos;
        if (!e[i]) { memcpy(o, ", ", 2); o += 2; }
        memcpy(o, text + bs[i], bl[i]);
        o += bl[i];
        pos = a[i];
    }
    if (!clash) memcpy(o, raw + pos, data.len - pos);
    Py_END_ALLOW_THREADS
    if (clash) Py_SETREF(out, Py_NewRef(Py_None));
done:
    if (needles.views) release(&needles);
    PyBuffer_Release(&data);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&at);
    PyBuffer_Release(&empty);
    PyBuffer_Release(&blob);
    PyBuffer_Release(&body_starts);
    PyBuffer_Release(&body_lengths);
    return out;
}

/* Every match, left to right and not overlapping, of the regex
 * "(key0|key1|...)"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*"|\{) in data (bytes regex semantics: \s is
 * space, \t, \n, \r, \f or \v; '.' is any byte but \n). Per match: the key's index, where its
 * value starts and stops, and the value as an int64 where it is a number (0 else). */
typedef struct {
    Py_ssize_t n, cap;
    int8_t *codes;
    int64_t *starts, *stops, *ints;
} KeyMatches;

static int key_matches_grow(KeyMatches *m) {
    Py_ssize_t cap = m->cap ? m->cap * 2 : 1024;
    int8_t *c = realloc(m->codes, cap);
    if (c) m->codes = c;
    int64_t *a = realloc(m->starts, cap * 8);
    if (a) m->starts = a;
    int64_t *b = realloc(m->stops, cap * 8);
    if (b) m->stops = b;
    int64_t *v = realloc(m->ints, cap * 8);
    if (v) m->ints = v;
    if (!c || !a || !b || !v) return 0;
    m->cap = cap;
    return 1;
}

static inline int is_regex_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* 1 on success, 0 when out of memory; *overflow counts numbers beyond int64. */
static int find_key_values(const unsigned char *d, Py_ssize_t len, const Buffers *keys, KeyMatches *m,
                           Py_ssize_t *overflow) {
    unsigned char first[256] = {0};  /* the bytes a key may start with (any, for an empty key) */
    for (Py_ssize_t k = 0; k < keys->n; k++) {
        if (keys->views[k].len == 0) memset(first, 1, sizeof first);
        else first[((const unsigned char *)keys->views[k].buf)[0]] = 1;
    }
    Py_ssize_t pos = 0;
    while (pos < len) {
        const unsigned char *hit = memchr(d + pos, '"', (size_t)(len - pos));
        if (!hit) break;
        Py_ssize_t p = hit - d;
        pos = p + 1;  /* where to look next if this quote starts no match */
        if (p + 1 >= len || !first[d[p + 1]]) continue;
        int code = -1;
        Py_ssize_t klen = 0;
        for (Py_ssize_t k = 0; k < keys->n; k++) {  /* a key, then its closing quote */
            klen = keys->views[k].len;
            const unsigned char *key = keys->views[k].buf;
            if (p + 1 + klen < len && d[p + 1 + klen] == '"' && (klen == 0 || d[p + 1] == key[0])
                && memcmp(key, d + p + 1, (size_t)klen) == 0) {
                code = (int)k;
                break;
            }
        }
        if (code < 0) continue;
        Py_ssize_t i = p + 1 + klen + 1;
        while (i < len && is_regex_space(d[i])) i++;
        if (i >= len || d[i] != ':') continue;
        i++;
        while (i < len && is_regex_space(d[i])) i++;
        if (i >= len) continue;
        Py_ssize_t start = i, stop = -1;
        int64_t value = 0;
        if (d[i] == '{') {
            stop = i + 1;
        } else if (d[i] == '"') {
            Py_ssize_t j = i + 1;
            while (j < len) {
                if (d[j] == '"') { stop = j + 1; break; }
                if (d[j] == '\\') {
                    if (j + 1 >= len || d[j + 1] == '\n') break;
                    j += 2;
                } else {
                    j++;
                }
            }
        } else {
            Py_ssize_t j = i;
            int negative = 0;
            if (d[j] == '-') { negative = 1; j++; }
            Py_ssize_t digits = j;
            uint64_t mag = 0;
            int big = 0;
            while (j < len && d[j] >= '0' && d[j] <= '9') {
                unsigned digit = d[j] - '0';
                if (mag > (UINT64_MAX - digit) / 10) big = 1;
                else mag = mag * 10 + digit;
                j++;
            }
            if (j > digits) {
                stop = j;
                if (big || mag > (uint64_t)INT64_MAX + (uint64_t)negative) { big = 1; (*overflow)++; }
                else value = negative ? (int64_t)(0 - mag) : (int64_t)mag;
            }
        }
        if (stop < 0) continue;
        if (m->n == m->cap && !key_matches_grow(m)) return 0;
        m->codes[m->n] = (int8_t)code;
        m->starts[m->n] = start;
        m->stops[m->n] = stop;
        m->ints[m->n] = value;
        m->n++;
        pos = stop;
    }
    return 1;
}

static PyObject *key_values(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data;
    PyObject *keys_arg;
    if (!PyArg_ParseTuple(args, "y*O", &data, &keys_arg)) return NULL;
    PyObject *out = NULL;
    Buffers keys = {0, NULL};
    KeyMatches m = {0, 0, NULL, NULL, NULL, NULL};
    Py_ssize_t overflow = 0;
    int ok;
    if (!get_buffers(keys_arg, &keys)) goto done;
    if (keys.n > 127) { PyErr_SetString(PyExc_ValueError, "at most 127 keys"); goto done; }
    Py_BEGIN_ALLOW_THREADS
    ok = find_key_values(data.buf, data.len, &keys, &m, &overflow);
    Py_END_ALLOW_THREADS
    if (!ok) { PyErr_NoMemory(); goto done; }
    if (!m.n) {
        out = Py_BuildValue("(y#y#y#y#n)", "", (Py_ssize_t)0, "", (Py_ssize_t)0, "", (Py_ssize_t)0, "",
                            (Py_ssize_t)0, overflow);
    } else {
        out = Py_BuildValue("(y#y#y#y#n)", (const char *)m.codes, m.n, (const char *)m.starts, m.n * 8,
                            (const char *)m.stops, m.n * 8, (const char *)m.ints, m.n * 8, overflow);
    }
done:
    free(m.codes);
    free(m.starts);
    free(m.stops);
    free(m.ints);
    if (keys.views) release(&keys);
    PyBuffer_Release(&data);
    return out;
}

/* A bytearray of n bytes left as malloc gives them: a block that is about to be filled
 * (bytearray(n) zeroes it first, a pass over every decompressed byte for nothing). */
static PyObject *uninitialized(PyObject *self, PyObject *arg) {
    (void)self;
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0) { PyErr_SetString(PyExc_ValueError, "negative size"); return NULL; }
    return PyByteArray_FromStringAndSize(NULL, n);
}

/* The AVX2 switch: the results are the same either way (tests compare them). */
static PyObject *set_avx2(PyObject *self, PyObject *arg) {
    (void)self;
    int enable = PyObject_IsTrue(arg);
    if (enable < 0) return NULL;
#ifdef TF_HAVE_AVX2_PATH
    int before = have_avx2;
    have_avx2 = enable && cpu_avx2;
    return PyBool_FromLong(before);
#else
    return Py_NewRef(Py_False);
#endif
}

static PyObject *avx2_supported(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
#ifdef TF_HAVE_AVX2_PATH
    return PyBool_FromLong(cpu_avx2);
#else
    return Py_NewRef(Py_False);
#endif
}

static PyMethodDef methods[] = {
    {"insert_members", insert_members, METH_VARARGS,
     "insert_members(data, starts, at, empty, blob, body_starts, body_lengths, needles) -> data with, for each "
     "event i that has a body (sorted), ', ' (none where empty[i]) and blob[body_starts[i]:][:body_lengths[i]] "
     "inserted at at[i]; None if an event with a body has at[i] < 0 or one of needles in data[starts[i]:at[i]] "
     "that its body adds (the needle followed by ':')"},
    {"key_values", key_values, METH_VARARGS,
     "key_values(data, keys) -> (codes, starts, stops, ints, overflow): every match, left to right, of "
     "'\"(key|...)\"\\s*:\\s*(-?\\d+|\"(?:[^\"\\\\]|\\\\.)*\"|\\{)' in data: the key's index in keys "
     "(int8), its value's start and stop and the value as an int64 where it is a number, else 0 (int64 "
     "arrays as bytes); overflow counts the numbers beyond int64 (0 in ints)"},
    {"uninitialized", uninitialized, METH_O, "uninitialized(n) -> a bytearray of n bytes, not zeroed"},
    {"join_rows", join_rows, METH_VARARGS,
     "join_rows(blobs, columns, rows, sep) -> (text, row lengths as int64 bytes): per row, the non-empty texts of "
     "the parts joined by sep; part p is blobs[p][starts[r]:][:lengths[r]] where columns[p] is (starts, lengths) "
     "(int64 arrays), or all of blobs[p] where it is None"},
    {"spans_containing", spans_containing, METH_VARARGS,
     "spans_containing(data, starts, stops, needles) -> one byte per span, 1 where one of needles occurs "
     "wholly inside data[starts[i]:stops[i]] (int64 arrays)"},
    {"set_avx2", set_avx2, METH_O,
     "set_avx2(enabled) -> whether the AVX2 key search was on before; turns it on (only where the CPU has "
     "AVX2 and the module was built with it) or off, for this process. It starts on where it can, unless the "
     "environment variable TRACEFORGE_NO_AVX2 was set (not to '' or '0') when the module loaded"},
    {"avx2_supported", avx2_supported, METH_NOARGS,
     "avx2_supported() -> whether set_avx2(True) can turn the AVX2 key search on (CPU and build)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_splice", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__splice(void) {
#ifdef TF_HAVE_AVX2_PATH
    const char *off = getenv("TRACEFORGE_NO_AVX2");
    cpu_avx2 = tf_cpu_has_avx2();
    have_avx2 = cpu_avx2 && !(off && *off && strcmp(off, "0") != 0);
#endif
    return PyModule_Create(&module);
}
