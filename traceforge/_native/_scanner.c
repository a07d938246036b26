/* Event scanner: validates a run of trace events and pulls out the fields the scan needs.
 *
 * The events of a trace are mostly copied, not used: building a Python dict for each costs
 * several times what reading the bytes does. This scanner walks a run of events
 * (`{...}, {...}, ...`) once, checks that each is well-formed JSON (the grammar of RFC 8259;
 * bytes >= 0x80 are passed through as the stdlib decoder with surrogateescape does), and
 * writes one row of int64 fields per event (see FIELD_* below). Strings the scan keys on
 * (ph, cat, name, args.kernel, and the (pid, tid) pair as raw JSON text) are interned to
 * dense ids in an Interner that outlives the call, so per-event work creates no objects
 * (nor does a new string: its bytes go in the interner's chunks).
 *
 * Anything it cannot represent exactly is flagged, never guessed: a time that is not a
 * plain decimal with at most 3 fraction digits, an int beyond 64 bits, an args field that
 * is not an int, an escaped key (F_ODD: the caller reads that event with a JSON parser).
 * At invalid JSON the run stops (ST_STOPPED) and the caller's exact decoder takes over.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include "portable.h"

enum {
    FIELD_START, FIELD_END, FIELD_PH, FIELD_CAT, FIELD_NAME, FIELD_TRACK, FIELD_TS, FIELD_DUR,
    FIELD_FLAGS, FIELD_ID, FIELD_ARGS_AT, FIELD_CORRELATION, FIELD_DEVICE,
    FIELD_STREAM, FIELD_BYTES, FIELD_KERNEL, FIELD_GRID, FIELD_BLOCK = FIELD_GRID + 3,
    FIELD_EXTERNAL_ID = FIELD_BLOCK + 3, FIELD_SHARED_MEMORY,
    FIELD_ALLOCATED, FIELD_RESERVED, FIELD_DEVICE_TYPE,  /* a [memory] instant's args */
    FIELD_TS_AT, FIELD_TS_END,  /* where the ts value's text is (-1: no ts key, -2: more than one) */
    NFIELDS
};

enum {
    F_TS = 1, F_DUR = 2, F_ODD = 4, F_ID = 8, F_ARGS = 16, F_CORRELATION = 32, F_DEVICE = 64,
    F_STREAM = 128, F_BYTES = 256, F_DIMS = 512, F_ARGS_EMPTY = 1024,
    /* how the event is written, for `check` (Perfetto reads a time written with a point
     * through a double; keys beyond those above send an event to a JSON parser there) */
    F_TS_FRAC = 2048, F_DUR_FRAC = 4096, F_DUR_KEY = 8192, F_EXTRA = 16384, F_BP_E = 32768,
    F_ARGS_ONE_NUMBER = 1 << 16, F_ID_KEY = 1 << 17, F_SCOPE_T = 1 << 18,
    F_GRID_SEEN = 1 << 20, F_BLOCK_SEEN = 1 << 21,  /* valid grid / block, while parsing */
    /* args "External id" / "shared memory" as 64-bit ints (only export reads them; any other
     * value counts as absent, so they never make an event odd) */
    F_EXTERNAL_ID = 1 << 22, F_SHARED_MEMORY = 1 << 23,
    /* a [memory] instant's args "Total Allocated", "Total Reserved", "Device Type" (its
     * "Device Id" and "Bytes" go to DEVICE and BYTES), 64-bit ints; never odd, as above */
    F_ALLOCATED = 1 << 24, F_RESERVED = 1 << 25, F_DEVICE_TYPE = 1 << 26
};

enum { ST_OK, ST_END, ST_INCOMPLETE, ST_STOPPED };

#define MAX_DEPTH 512

/* ---- interner: byte strings -> dense ids, the strings' bytes kept in chunks ----
 *
 * A trace may name millions of distinct strings (a kernel per template instance): each costs
 * its bytes, 12 bytes of place and length, and an 8-byte slot or two, never a Python object.
 * The bytes go in chunks that never move once full: the first is on the heap and grows up to
 * HEAP_TEXT; the ones after come from the interner's store, a callable giving a writable
 * buffer of at least the bytes asked (``io.memory.paged``'s file maps, whose pages leave
 * resident memory whenever the others' do), or from the heap without one. A string lies in
 * one chunk (a string longer than CHUNK_TEXT has a chunk of its own). */

#define HEAP_TEXT (8 << 20)
#define CHUNK_TEXT (8 << 20)
#define CHUNK_BITS 40  /* a string's place: its chunk << CHUNK_BITS | its offset in the chunk */

/* A probe reads one slot: 32 bits of the hash tell most strings apart before their bytes. */
typedef struct {
    uint32_t tag;
    int32_t id;           /* -1: empty */
} Slot;

typedef struct {
    char *text;
    Py_ssize_t len, cap;
    Py_buffer view;       /* view.obj set: the buffer is the store's */
} Chunk;

typedef struct {
    Py_ssize_t cap;       /* slots, a power of two */
    Py_ssize_t count;     /* strings */
    Slot *slots;
    uint64_t *place;      /* per id */
    int32_t *len;         /* per id */
    Py_ssize_t ids_cap;
    Chunk *chunks;
    Py_ssize_t nchunks, chunks_cap;
    PyObject *store;      /* callable(nbytes) -> writable buffer, or NULL */
} Interner;

static const char *INTERNER = "traceforge._scanner.Interner";

static void interner_free(PyObject *capsule) {
    Interner *in = PyCapsule_GetPointer(capsule, INTERNER);
    if (!in) return;
    for (Py_ssize_t c = 0; c < in->nchunks; c++) {
        if (in->chunks[c].view.obj) PyBuffer_Release(&in->chunks[c].view);
        else PyMem_RawFree(in->chunks[c].text);
    }
    PyMem_Free(in->chunks);
    PyMem_Free(in->slots);
    PyMem_Free(in->place);
    PyMem_Free(in->len);
    Py_XDECREF(in->store);
    PyMem_Free(in);
}

static int interner_alloc(Interner *in, Py_ssize_t cap) {
    in->slots = PyMem_Malloc(cap * sizeof(Slot));
    if (!in->slots) return -1;
    for (Py_ssize_t j = 0; j < cap; j++) in->slots[j].id = -1;
    in->cap = cap;
    return 0;
}

static PyObject *new_interner(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *store = Py_None;
    if (!PyArg_ParseTuple(args, "|O:Interner", &store)) return NULL;
    if (store != Py_None && !PyCallable_Check(store)) {
        PyErr_SetString(PyExc_TypeError, "Interner(store): store must be callable or None");
        return NULL;
    }
    Interner *in = PyMem_Calloc(1, sizeof(Interner));
    if (!in || interner_alloc(in, 1024) < 0) {
        if (in) { PyMem_Free(in->slots); PyMem_Free(in); }
        return PyErr_NoMemory();
    }
    if (store != Py_None) { Py_INCREF(store); in->store = store; }
    PyObject *capsule = PyCapsule_New(in, INTERNER, interner_free);
    if (!capsule) {
        PyMem_Free(in->slots);
        Py_XDECREF(in->store);
        PyMem_Free(in);
        return NULL;
    }
    return capsule;
}

/* A word at a time: names of hundreds of bytes are hashed once per event. */
static uint64_t hash_bytes(const char *p, Py_ssize_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n, w;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 31;
    }
    w = 0;
    if (n >= 4) {  /* the tail in at most two loads (a memcpy of n bytes became a byte loop) */
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + n - 4, 4);
        w = (uint64_t)lo | (uint64_t)hi << 32;
    } else if (n) {
        const unsigned char *u = (const unsigned char *)p;
        w = (uint64_t)u[0] | (uint64_t)u[n / 2] << 8 | (uint64_t)u[n - 1] << 16;
    }
    h = (h ^ w) * 0x94D049BB133111EBULL;
    return h ^ (h >> 29);
}

static inline const char *text_of(const Interner *in, int32_t id) {
    uint64_t at = in->place[id];
    return in->chunks[at >> CHUNK_BITS].text + (at & (((uint64_t)1 << CHUNK_BITS) - 1));
}

/* The slots' hashes are the strings' again: the table grows without keeping them. */
static int interner_grow(Interner *in) {
    Py_ssize_t old_cap = in->cap;
    Slot *old = in->slots;
    if (interner_alloc(in, old_cap * 2) < 0) { in->slots = old; in->cap = old_cap; return -1; }
    for (Py_ssize_t i = 0; i < old_cap; i++) {
        if (old[i].id < 0) continue;
        uint64_t h = hash_bytes(text_of(in, old[i].id), in->len[old[i].id]);
        Py_ssize_t j = h & (in->cap - 1);
        while (in->slots[j].id >= 0) j = (j + 1) & (in->cap - 1);
        in->slots[j] = old[i];
    }
    PyMem_Free(old);
    return 0;
}

/* The slot of bytes p[0:n]: its id, or -1 (and the free slot in *slot). Needs no GIL:
 * the strings only grow, and only under the GIL, while no lookup runs. */
static int64_t lookup(Interner *in, const char *p, Py_ssize_t n, uint64_t h, Py_ssize_t *slot) {
    Py_ssize_t j = h & (in->cap - 1);
    const uint32_t tag = (uint32_t)(h >> 32);
    for (;; j = (j + 1) & (in->cap - 1)) {
        const Slot *at = &in->slots[j];
        if (at->id < 0) break;
        if (at->tag == tag && in->len[at->id] == n && memcmp(text_of(in, at->id), p, n) == 0) return at->id;
    }
    *slot = j;
    return -1;
}

/* Room for n more bytes of text in the last chunk (a new chunk where it has none); GIL held. */
static int make_room(Interner *in, Py_ssize_t n) {
    Chunk *last = in->nchunks ? &in->chunks[in->nchunks - 1] : NULL;
    if (last && last->cap - last->len >= n) return 0;
    if (last && !last->view.obj && in->nchunks == 1 && last->len + n <= HEAP_TEXT) {
        Py_ssize_t cap = last->cap * 2 > last->len + n ? last->cap * 2 : last->len + n;
        if (cap > HEAP_TEXT) cap = HEAP_TEXT;
        char *grown = PyMem_RawRealloc(last->text, cap);
        if (!grown) { PyErr_NoMemory(); return -1; }
        last->text = grown;
        last->cap = cap;
        return 0;
    }
    if (in->nchunks == in->chunks_cap) {
        Py_ssize_t cap = in->chunks_cap ? in->chunks_cap * 2 : 8;
        Chunk *grown = PyMem_Realloc(in->chunks, cap * sizeof(Chunk));
        if (!grown) { PyErr_NoMemory(); return -1; }
        in->chunks = grown;
        in->chunks_cap = cap;
    }
    Chunk fresh = {NULL, 0, 0, {0}};
    if (!in->nchunks) {
        fresh.cap = n > 4096 ? n : 4096;
        fresh.text = PyMem_RawMalloc(fresh.cap);
        if (!fresh.text) { PyErr_NoMemory(); return -1; }
    } else {
        fresh.cap = n > CHUNK_TEXT ? n : CHUNK_TEXT;
        if (in->store) {
            PyObject *buffer = PyObject_CallFunction(in->store, "n", fresh.cap);
            if (!buffer) return -1;
            int rc = PyObject_GetBuffer(buffer, &fresh.view, PyBUF_WRITABLE);
            Py_DECREF(buffer);
            if (rc < 0) return -1;
            if (fresh.view.len < fresh.cap) {
                PyBuffer_Release(&fresh.view);
                PyErr_SetString(PyExc_ValueError, "Interner: the store gave a buffer shorter than asked");
                return -1;
            }
            fresh.text = fresh.view.buf;
            fresh.cap = fresh.view.len;
        } else {
            fresh.text = PyMem_RawMalloc(fresh.cap);
            if (!fresh.text) { PyErr_NoMemory(); return -1; }
        }
    }
    if ((uint64_t)fresh.cap >= (uint64_t)1 << CHUNK_BITS) {
        if (fresh.view.obj) PyBuffer_Release(&fresh.view); else PyMem_RawFree(fresh.text);
        PyErr_SetString(PyExc_OverflowError, "too many or too long strings to intern");
        return -1;
    }
    in->chunks[in->nchunks++] = fresh;
    return 0;
}

/* Add bytes p[0:n] at `slot` (GIL held); its id, or -3 on memory error (a Python error is set). */
static int64_t insert(Interner *in, const char *p, Py_ssize_t n, uint64_t h, Py_ssize_t j) {
    int64_t id = in->count;
    if (id >= INT32_MAX || n > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "too many or too long strings to intern");
        return -3;
    }
    if (id == in->ids_cap) {
        Py_ssize_t cap = in->ids_cap ? in->ids_cap * 2 : 1024;
        uint64_t *place = PyMem_Realloc(in->place, cap * sizeof(uint64_t));
        if (place) in->place = place;
        int32_t *len = place ? PyMem_Realloc(in->len, cap * sizeof(int32_t)) : NULL;
        if (!len) { PyErr_NoMemory(); return -3; }
        in->len = len;
        in->ids_cap = cap;
    }
    /* p may point into the data being scanned or into a Python bytes object: the store's
     * call below cannot move either. */
    if (make_room(in, n) < 0) return -3;
    Chunk *last = &in->chunks[in->nchunks - 1];
    if (n) memcpy(last->text + last->len, p, n);
    in->place[id] = (uint64_t)(in->nchunks - 1) << CHUNK_BITS | (uint64_t)last->len;
    in->len[id] = (int32_t)n;
    last->len += n;
    in->slots[j].id = (int32_t)id;
    in->slots[j].tag = (uint32_t)(h >> 32);
    in->count = id + 1;
    if (in->count * 4 > in->cap * 3 && interner_grow(in) < 0) { PyErr_NoMemory(); return -3; }
    return id;
}

static int64_t intern_held(Interner *in, const char *p, Py_ssize_t n) {
    Py_ssize_t slot;
    uint64_t h = hash_bytes(p, n);
    int64_t id = lookup(in, p, n, h, &slot);
    return id >= 0 ? id : insert(in, p, n, h, slot);
}

/* ---- parser ---- */

typedef struct {
    const unsigned char *b;
    Py_ssize_t n, pos;
    int status;            /* 0 fine, ST_INCOMPLETE: ran out of input, ST_STOPPED: see msg */
    Py_ssize_t err_pos;
    const char *msg;
    int depth;
    PyThreadState *released;  /* the GIL is released while scanning; NULL when held */
} Parser;

/* intern() while scanning: the GIL is taken back only to add a new string. */
static int64_t intern(Parser *p, Interner *in, const char *s, Py_ssize_t n) {
    Py_ssize_t slot;
    uint64_t h = hash_bytes(s, n);
    int64_t id = lookup(in, s, n, h, &slot);
    if (id >= 0) return id;
    PyEval_RestoreThread(p->released);
    id = insert(in, s, n, h, slot);
    p->released = PyEval_SaveThread();
    return id;
}

static int fail(Parser *p, const char *msg) {
    if (!p->status) { p->status = ST_STOPPED; p->err_pos = p->pos; p->msg = msg; }
    return -1;
}

static int incomplete(Parser *p) {
    if (!p->status) { p->status = ST_INCOMPLETE; p->err_pos = p->pos; p->msg = "input ends inside an event"; }
    return -1;
}

static inline void skip_ws(Parser *p) {
    while (p->pos < p->n) {
        unsigned char c = p->b[p->pos];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
        p->pos++;
    }
}

static inline int is_hex(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

#ifdef TF_HAVE_SSE2
/* A bit for each of the 16 bytes at b that is '"', '\\' or a control character. */
static inline int stop_bits(const unsigned char *b) {
    const __m128i flip = _mm_set1_epi8((char)0x80);
    __m128i v = _mm_loadu_si128((const __m128i *)b);
    /* unsigned v < 0x20, as a signed compare after flipping the top bit */
    __m128i control = _mm_cmplt_epi8(_mm_xor_si128(v, flip), _mm_xor_si128(_mm_set1_epi8(0x20), flip));
    __m128i quote_or_backslash = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\')));
    return _mm_movemask_epi8(_mm_or_si128(quote_or_backslash, control));
}
#endif

/* Offset of the first '"', '\\' or control character in b[i:n], or n. */
static inline Py_ssize_t string_stop(const unsigned char *b, Py_ssize_t i, Py_ssize_t n) {
#ifdef TF_HAVE_SSE2
    for (; i + 16 <= n; i += 16) {
        int mask = stop_bits(b + i);
        if (mask) return i + tf_ctz32((uint32_t)mask);
    }
#endif
    for (; i < n; i++) {
        unsigned char c = b[i];
        if (c == '"' || c == '\\' || c < 0x20) return i;
    }
    return n;
}

/* parse_string's general case: escapes, long strings, the end of the data, errors. */
static TF_NOINLINE int parse_string_slow(Parser *p, Py_ssize_t *start, Py_ssize_t *end, int *escaped) {
    const unsigned char *b = p->b;
    Py_ssize_t i = p->pos + 1, n = p->n;
    int esc = 0;
    *start = i;
    for (;;) {
        i = string_stop(b, i, n);
        if (i >= n) { p->pos = n; return incomplete(p); }
        unsigned char c = b[i];
        if (c == '"') break;
        if (c < 0x20) { p->pos = i; return fail(p, "invalid control character in a string"); }
        esc = 1;  /* a backslash */
        if (i + 1 >= n) { p->pos = n; return incomplete(p); }
        unsigned char e = b[i + 1];
        if (e == 'u') {
            for (int h = 2; h < 6; h++) {
                if (i + h >= n) { p->pos = n; return incomplete(p); }
                if (!is_hex(b[i + h])) { p->pos = i; return fail(p, "invalid \\u escape"); }
            }
            i += 6;
        } else if (e && strchr("\"\\/bfnrt", e)) {
            i += 2;
        } else {
            p->pos = i;
            return fail(p, "invalid escape in a string");
        }
    }
    *end = i;
    *escaped = esc;
    p->pos = i + 1;
    return 0;
}

/* A string at pos (which holds '"'): its content is b[*start:*end]; *escaped if it has a '\\'.
 * Inlined for the common case, a plain string ending in the next 16 bytes (keys, ph, cat,
 * most names): an event has 15-20 strings, and a call per string was a quarter of the scan. */
static inline int parse_string(Parser *p, Py_ssize_t *start, Py_ssize_t *end, int *escaped) {
#ifdef TF_HAVE_SSE2
    Py_ssize_t i = p->pos + 1;
    int stops = i + 16 <= p->n ? stop_bits(p->b + i) : 0;
    if (stops) {
        Py_ssize_t e = i + tf_ctz32((uint32_t)stops);
        if (p->b[e] == '"') {  /* the first stop is the closing quote: no escape before it */
            *start = i;
            *end = e;
            *escaped = 0;
            p->pos = e + 1;
            return 0;
        }
    }
#endif
    return parse_string_slow(p, start, end, escaped);
}

/* Eight bytes of b at i, the first in the low byte. */
static inline uint64_t load8(const unsigned char *b, Py_ssize_t i) {
    return tf_load_le64(b + i);
}

/* How many of the eight bytes in w, from the first, are ASCII digits (SWAR: timestamps
 * have 16-19 digits, read here eight at a time). A carry out of a byte that is not a digit
 * can only spoil the bytes after it. */
static inline int leading_digits(uint64_t w) {
    uint64_t x = w ^ 0x3030303030303030ULL;  /* digits become 0-9 */
    uint64_t other = (x | (x + 0x0606060606060606ULL)) & 0xF0F0F0F0F0F0F0F0ULL;
    return other ? tf_ctz64(other) >> 3 : 8;
}

/* The value of the first k (1-8) digits in w. */
static inline uint64_t digits_value(uint64_t w, int k) {
    w = (w & 0x0F0F0F0F0F0F0F0FULL) << (8 * (8 - k));  /* leading zeros in front */
    w = (w * 2561) >> 8;
    w = ((w & 0x00FF00FF00FF00FFULL) * 6553601) >> 16;
    return ((w & 0x0000FFFF0000FFFFULL) * 42949672960001ULL) >> 32;
}

static const uint64_t POW10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

/* Digits from b[*i] on: their count (*i moves past them) and, for up to 19, their value in
 * *value (*overflow set for more: such a number is beyond every int64 field). */
static inline void digit_run(const unsigned char *b, Py_ssize_t *i, Py_ssize_t n, uint64_t *value, int *overflow) {
    Py_ssize_t j = *i;
    uint64_t v = 0;
    int count = 0;
    for (;;) {
        if (j + 8 <= n) {
            uint64_t w = load8(b, j);
            int k = leading_digits(w);
            if (k) {
                if (count + k <= 19) v = v * POW10[k] + digits_value(w, k);
                count += k;
                j += k;
            }
            if (k < 8) break;
        } else {
            if (j >= n || b[j] < '0' || b[j] > '9') break;
            if (count < 19) v = v * 10 + (b[j] - '0');
            count++;
            j++;
        }
    }
    *i = j;
    *value = v;
    if (count > 19) *overflow = 1;
}

typedef struct {
    int is_int;       /* no fraction or exponent, and fits int64 */
    int64_t ival;
    int ns_ok;        /* exactly value * 1000 as int64 (at most 3 fraction digits, no exponent) */
    int64_t ns;
} Number;

static TF_ALWAYS_INLINE int parse_number(Parser *p, Number *num) {
    const unsigned char *b = p->b;
    Py_ssize_t i = p->pos, n = p->n;
    int neg = 0, overflow = 0, frac_digits = 0, has_exp = 0;
    uint64_t whole = 0, frac = 0;
    if (i < n && b[i] == '-') { neg = 1; i++; }
    if (i >= n) { p->pos = i; return incomplete(p); }
    if (b[i] == '0') {
        i++;
    } else if (b[i] >= '1' && b[i] <= '9') {
        digit_run(b, &i, n, &whole, &overflow);
    } else {
        p->pos = i; return fail(p, "invalid number");
    }
    if (i < n && b[i] == '.') {
        i++;
        if (i >= n) { p->pos = i; return incomplete(p); }
        if (!(b[i] >= '0' && b[i] <= '9')) { p->pos = i; return fail(p, "invalid number"); }
        while (i < n && b[i] >= '0' && b[i] <= '9') {
            if (frac_digits < 3) frac = frac * 10 + (b[i] - '0');
            frac_digits++;
            i++;
        }
    }
    if (i < n && (b[i] == 'e' || b[i] == 'E')) {
        has_exp = 1;
        i++;
        if (i < n && (b[i] == '+' || b[i] == '-')) i++;
        if (i >= n) { p->pos = i; return incomplete(p); }
        if (!(b[i] >= '0' && b[i] <= '9')) { p->pos = i; return fail(p, "invalid number"); }
        while (i < n && b[i] >= '0' && b[i] <= '9') i++;
    }
    if (i >= n) { p->pos = i; return incomplete(p); }  /* a number cannot end an event */
    p->pos = i;
    num->is_int = !overflow && !frac_digits && !has_exp && whole <= (uint64_t)INT64_MAX + neg;
    if (num->is_int) num->ival = neg ? (int64_t)(0 - whole) : (int64_t)whole;
    num->ns_ok = 0;
    if (!overflow && !has_exp && frac_digits <= 3 && whole <= (uint64_t)(INT64_MAX / 1000 - 1)) {
        for (int d = frac_digits; d < 3; d++) frac *= 10;
        int64_t ns = (int64_t)(whole * 1000 + frac);
        num->ns = neg ? -ns : ns;
        num->ns_ok = 1;
    }
    return 0;
}

static int expect_literal(Parser *p, const char *word, Py_ssize_t len) {
    Py_ssize_t have = p->n - p->pos;
    if (memcmp(p->b + p->pos, word, have < len ? have : len) != 0) return fail(p, "invalid JSON value");
    if (have < len) { p->pos = p->n; return incomplete(p); }
    p->pos += len;
    return 0;
}

static int skip_value(Parser *p);

/* Calls on_member(ctx, key, value) for each member; the callback parses the value. */
typedef int (*MemberFn)(Parser *p, void *ctx, const unsigned char *key, Py_ssize_t key_len, int key_escaped);

/* ``members_end`` (if not NULL): where the last member's value ends, -1 for an empty object. */
static int parse_object(Parser *p, MemberFn on_member, void *ctx, Py_ssize_t *members_end) {
    if (++p->depth > MAX_DEPTH) return fail(p, "nesting too deep");
    p->pos++;  /* '{' */
    skip_ws(p);
    if (p->pos >= p->n) return incomplete(p);
    if (members_end) *members_end = -1;
    if (p->b[p->pos] == '}') { p->pos++; p->depth--; return 0; }
    for (;;) {
        if (p->pos >= p->n) return incomplete(p);
        if (p->b[p->pos] != '"') return fail(p, "expected a key (a string)");
        Py_ssize_t ks, ke;
        int kesc;
        if (parse_string(p, &ks, &ke, &kesc) < 0) return -1;
        skip_ws(p);
        if (p->pos >= p->n) return incomplete(p);
        if (p->b[p->pos] != ':') return fail(p, "expected ':' after a key");
        p->pos++;
        skip_ws(p);
        if (p->pos >= p->n) return incomplete(p);
        int rc = on_member ? on_member(p, ctx, p->b + ks, ke - ks, kesc) : skip_value(p);
        if (rc < 0) return -1;
        if (members_end) *members_end = p->pos;
        skip_ws(p);
        if (p->pos >= p->n) return incomplete(p);
        unsigned char c = p->b[p->pos];
        if (c == ',') {
            p->pos++;
            skip_ws(p);
            continue;
        }
        if (c == '}') { p->pos++; p->depth--; return 0; }
        return fail(p, "expected ',' or '}' in an object");
    }
}

static int skip_value(Parser *p) {
    Py_ssize_t s, e;
    int esc;
    Number num;
    if (p->pos >= p->n) return incomplete(p);
    switch (p->b[p->pos]) {
    case '"': return parse_string(p, &s, &e, &esc);
    case '{': return parse_object(p, NULL, NULL, NULL);
    case '[':
        if (++p->depth > MAX_DEPTH) return fail(p, "nesting too deep");
        p->pos++;
        skip_ws(p);
        if (p->pos >= p->n) return incomplete(p);
        if (p->b[p->pos] == ']') { p->pos++; p->depth--; return 0; }
        for (;;) {
            if (skip_value(p) < 0) return -1;
            skip_ws(p);
            if (p->pos >= p->n) return incomplete(p);
            if (p->b[p->pos] == ',') { p->pos++; skip_ws(p); continue; }
            if (p->b[p->pos] == ']') { p->pos++; p->depth--; return 0; }
            return fail(p, "expected ',' or ']' in an array");
        }
    case 't': return expect_literal(p, "true", 4);
    case 'f': return expect_literal(p, "false", 5);
    case 'n': return expect_literal(p, "null", 4);
    default: return parse_number(p, &num);
    }
}

/* ---- one event ---- */

typedef struct {
    int64_t *row;
    Interner *strings;
    Py_ssize_t pid_start, pid_end, tid_start, tid_end;
    int args_members, args_numbers;  /* in the args object being read */
} Event;

static inline int key_is(const unsigned char *key, Py_ssize_t len, const char *name, Py_ssize_t name_len) {
    return len == name_len && memcmp(key, name, len) == 0;
}
#define KEY(name) key_is(key, key_len, name, sizeof(name) - 1)

/* A string value's id in `strings`; -2 for a value that is not a string. */
static int parse_interned(Parser *p, Interner *strings, int64_t *out) {
    if (p->b[p->pos] != '"') { *out = -2; return skip_value(p); }
    Py_ssize_t s, e;
    int esc;
    if (parse_string(p, &s, &e, &esc) < 0) return -1;
    int64_t id = intern(p, strings, (const char *)p->b + s, e - s);
    if (id == -3) return fail(p, "out of memory");
    *out = id;
    return 0;
}

/* An int field: its value and `flag`; where it is there but not a 64-bit int, `flag` off and
 * `otherwise` on (F_ODD: a JSON parser decides; 0: it counts as absent). */
static int parse_int_field(Parser *p, int64_t *row, int field, int flag, int otherwise) {
    unsigned char c = p->b[p->pos];
    if (c == '-' || (c >= '0' && c <= '9')) {
        Number num;
        if (parse_number(p, &num) < 0) return -1;
        if (num.is_int) { row[field] = num.ival; row[FIELD_FLAGS] |= flag; return 0; }
    } else if (skip_value(p) < 0) {
        return -1;
    }
    row[FIELD_FLAGS] = (row[FIELD_FLAGS] & ~flag) | otherwise;
    return 0;
}

/* A time in µs as exact ns and `flag`; F_ODD for text a JSON parser must decide on. */
static int parse_time(Parser *p, int64_t *row, int field, int flag, int frac_flag) {
    unsigned char c = p->b[p->pos];
    row[FIELD_FLAGS] &= ~(flag | frac_flag);
    if (c == '-' || (c >= '0' && c <= '9')) {
        Number num;
        if (parse_number(p, &num) < 0) return -1;
        if (num.ns_ok) { row[field] = num.ns; row[FIELD_FLAGS] |= flag | (num.is_int ? 0 : frac_flag); }
        else row[FIELD_FLAGS] |= F_ODD;
        return 0;
    }
    if (c == '"') row[FIELD_FLAGS] |= F_ODD;  /* a time as text: to_ns decides */
    return skip_value(p);                     /* anything else is not a time */
}

/* grid/block: three ints, else not valid. 1 valid, 0 not. */
static int parse_dims(Parser *p, int64_t *out, int *valid) {
    *valid = 0;
    if (p->b[p->pos] != '[') return skip_value(p);
    int count = 0, ints = 1;
    p->pos++;
    skip_ws(p);
    if (p->pos >= p->n) return incomplete(p);
    if (p->b[p->pos] == ']') { p->pos++; return 0; }
    for (;;) {
        unsigned char c = p->b[p->pos];
        if (c == '-' || (c >= '0' && c <= '9')) {
            Number num;
            if (parse_number(p, &num) < 0) return -1;
            if (num.is_int && count < 3) out[count] = num.ival;
            else if (!num.is_int) ints = 0;
        } else {
            ints = 0;
            if (skip_value(p) < 0) return -1;
        }
        count++;
        skip_ws(p);
        if (p->pos >= p->n) return incomplete(p);
        if (p->b[p->pos] == ',') { p->pos++; skip_ws(p); if (p->pos >= p->n) return incomplete(p); continue; }
        if (p->b[p->pos] == ']') { p->pos++; break; }
        return fail(p, "expected ',' or ']' in an array");
    }
    *valid = ints && count == 3;
    return 0;
}

static int on_args_member(Parser *p, void *ctx, const unsigned char *key, Py_ssize_t key_len, int key_escaped) {
    Event *ev = ctx;
    int64_t *row = ev->row;
    unsigned char first = p->b[p->pos];
    ev->args_members++;
    ev->args_numbers += first == '-' || (first >= '0' && first <= '9');
    if (key_escaped) { row[FIELD_FLAGS] |= F_ODD; return skip_value(p); }
    if (KEY("correlation")) return parse_int_field(p, row, FIELD_CORRELATION, F_CORRELATION, F_ODD);
    if (KEY("device")) return parse_int_field(p, row, FIELD_DEVICE, F_DEVICE, F_ODD);
    if (KEY("stream")) return parse_int_field(p, row, FIELD_STREAM, F_STREAM, F_ODD);
    if (KEY("bytes")) return parse_int_field(p, row, FIELD_BYTES, F_BYTES, F_ODD);
    if (KEY("External id")) return parse_int_field(p, row, FIELD_EXTERNAL_ID, F_EXTERNAL_ID, 0);
    if (KEY("shared memory")) return parse_int_field(p, row, FIELD_SHARED_MEMORY, F_SHARED_MEMORY, 0);
    if (KEY("Total Allocated")) return parse_int_field(p, row, FIELD_ALLOCATED, F_ALLOCATED, 0);
    if (KEY("Total Reserved")) return parse_int_field(p, row, FIELD_RESERVED, F_RESERVED, 0);
    if (KEY("Device Type")) return parse_int_field(p, row, FIELD_DEVICE_TYPE, F_DEVICE_TYPE, 0);
    if (KEY("Device Id")) return parse_int_field(p, row, FIELD_DEVICE, F_DEVICE, 0);
    if (KEY("Bytes")) return parse_int_field(p, row, FIELD_BYTES, F_BYTES, 0);
    if (KEY("kernel")) {
        int64_t id;
        if (parse_interned(p, ev->strings, &id) < 0) return -1;
        row[FIELD_KERNEL] = id < 0 ? -1 : id;
        return 0;
    }
    if (KEY("grid") || KEY("block")) {
        int field = KEY("grid") ? FIELD_GRID : FIELD_BLOCK, valid;
        int64_t dims[3];
        if (parse_dims(p, dims, &valid) < 0) return -1;
        int64_t mark = field == FIELD_GRID ? F_GRID_SEEN : F_BLOCK_SEEN;
        if (valid) memcpy(row + field, dims, sizeof dims);
        row[FIELD_FLAGS] = valid ? (row[FIELD_FLAGS] | mark) : (row[FIELD_FLAGS] & ~mark);
        return 0;
    }
    return skip_value(p);
}

static const int64_t ARGS_FLAGS = F_ARGS | F_ARGS_EMPTY | F_CORRELATION | F_DEVICE | F_STREAM | F_BYTES | F_GRID_SEEN |
                                  F_BLOCK_SEEN | F_ARGS_ONE_NUMBER | F_EXTERNAL_ID | F_SHARED_MEMORY |
                                  F_ALLOCATED | F_RESERVED | F_DEVICE_TYPE;

static int on_event_member(Parser *p, void *ctx, const unsigned char *key, Py_ssize_t key_len, int key_escaped) {
    Event *ev = ctx;
    int64_t *row = ev->row;
    if (key_escaped) { row[FIELD_FLAGS] |= F_ODD; return skip_value(p); }
    switch (key_len) {
    case 1:
        if (KEY("s")) {  /* an instant's scope: "t" (its thread) is Kineto's */
            row[FIELD_FLAGS] &= ~F_SCOPE_T;
            Py_ssize_t s = p->pos;
            if (skip_value(p) < 0) return -1;
            row[FIELD_FLAGS] |= p->pos - s == 3 && memcmp(p->b + s, "\"t\"", 3) == 0 ? F_SCOPE_T : F_EXTRA;
            return 0;
        }
        break;
    case 2:
        if (KEY("ph")) return parse_interned(p, ev->strings, &row[FIELD_PH]);
        if (KEY("ts")) {
            row[FIELD_TS_AT] = row[FIELD_TS_AT] == -1 ? p->pos : -2;
            if (parse_time(p, row, FIELD_TS, F_TS, F_TS_FRAC) < 0) return -1;
            row[FIELD_TS_END] = p->pos;
            return 0;
        }
        if (KEY("id")) {
            row[FIELD_FLAGS] = (row[FIELD_FLAGS] & ~F_ID) | F_ID_KEY;
            unsigned char c = p->b[p->pos];
            if (c == '-' || (c >= '0' && c <= '9')) {
                Number num;
                if (parse_number(p, &num) < 0) return -1;
                if (num.is_int) { row[FIELD_ID] = num.ival; row[FIELD_FLAGS] |= F_ID; }
                else row[FIELD_FLAGS] |= F_ODD;
                return 0;
            }
            return skip_value(p);
        }
        if (KEY("bp")) {  /* a flow end's binding point: "e" (enclosing slice) is Kineto's */
            row[FIELD_FLAGS] &= ~F_BP_E;  /* a repeated key: the last one counts */
            Py_ssize_t s = p->pos;
            if (skip_value(p) < 0) return -1;
            row[FIELD_FLAGS] |= p->pos - s == 3 && memcmp(p->b + s, "\"e\"", 3) == 0 ? F_BP_E : F_EXTRA;
            return 0;
        }
        break;
    case 3:
        if (KEY("cat")) return parse_interned(p, ev->strings, &row[FIELD_CAT]);
        if (KEY("dur")) { row[FIELD_FLAGS] |= F_DUR_KEY; return parse_time(p, row, FIELD_DUR, F_DUR, F_DUR_FRAC); }
        if (KEY("pid") || KEY("tid")) {
            int is_pid = KEY("pid");
            Py_ssize_t s = p->pos;
            if (skip_value(p) < 0) return -1;
            if (is_pid) { ev->pid_start = s; ev->pid_end = p->pos; }
            else { ev->tid_start = s; ev->tid_end = p->pos; }
            return 0;
        }
        break;
    case 4:
        if (KEY("name")) return parse_interned(p, ev->strings, &row[FIELD_NAME]);
        if (KEY("args")) {
            row[FIELD_FLAGS] &= ~ARGS_FLAGS;
            row[FIELD_CORRELATION] = row[FIELD_DEVICE] = row[FIELD_STREAM] = row[FIELD_BYTES] = 0;
            row[FIELD_EXTERNAL_ID] = row[FIELD_SHARED_MEMORY] = 0;
            row[FIELD_ALLOCATED] = row[FIELD_RESERVED] = row[FIELD_DEVICE_TYPE] = 0;
            row[FIELD_KERNEL] = -1;
            if (p->b[p->pos] != '{') return skip_value(p);
            Py_ssize_t members_end;
            ev->args_members = ev->args_numbers = 0;
            if (parse_object(p, on_args_member, ev, &members_end) < 0) return -1;
            if (ev->args_members == 1 && ev->args_numbers == 1) row[FIELD_FLAGS] |= F_ARGS_ONE_NUMBER;
            /* where new members go: after the last one, or before the '}' of an empty object */
            row[FIELD_ARGS_AT] = members_end >= 0 ? members_end : p->pos - 1;
            row[FIELD_FLAGS] |= F_ARGS | (members_end < 0 ? F_ARGS_EMPTY : 0);
            return 0;
        }
        break;
    }
    row[FIELD_FLAGS] |= F_EXTRA;
    return skip_value(p);
}

static int parse_event(Parser *p, int64_t *row, Interner *strings, Interner *tracks, char **keybuf, Py_ssize_t *keycap) {
    Event ev = {row, strings, -1, -1, -1, -1, 0, 0};
    memset(row, 0, NFIELDS * sizeof(int64_t));
    row[FIELD_PH] = row[FIELD_CAT] = row[FIELD_NAME] = row[FIELD_KERNEL] = row[FIELD_TS_AT] = -1;
    row[FIELD_START] = p->pos;
    if (parse_object(p, on_event_member, &ev, NULL) < 0) return -1;
    row[FIELD_END] = p->pos;
    int64_t flags = row[FIELD_FLAGS];
    if ((flags & F_GRID_SEEN) && (flags & F_BLOCK_SEEN)) flags |= F_DIMS;
    flags &= ~(int64_t)(F_GRID_SEEN | F_BLOCK_SEEN);
    row[FIELD_FLAGS] = flags;
    /* The track: raw JSON text of pid, a NUL, raw text of tid ("" where missing). */
    Py_ssize_t pl = ev.pid_start < 0 ? 0 : ev.pid_end - ev.pid_start;
    Py_ssize_t tl = ev.tid_start < 0 ? 0 : ev.tid_end - ev.tid_start;
    if (pl + tl + 1 > *keycap) {
        char *grown = PyMem_RawRealloc(*keybuf, pl + tl + 1);
        if (!grown) return fail(p, "out of memory");  /* reported as a stop; the exact decoder takes over */
        *keybuf = grown;
        *keycap = pl + tl + 1;
    }
    if (pl) memcpy(*keybuf, p->b + ev.pid_start, pl);
    (*keybuf)[pl] = 0;
    if (tl) memcpy(*keybuf + pl + 1, p->b + ev.tid_start, tl);
    int64_t track = intern(p, tracks, *keybuf, pl + tl + 1);
    if (track == -3) return fail(p, "out of memory");
    row[FIELD_TRACK] = track;
    return 0;
}

/* scan(data, start, limit, strings, tracks) -> (status, count, stop, err_pos, message, rows)
 *
 * Events start at data[start]; offsets (in rows and returned) count from there. Stops after the separator that reaches `limit` (ST_OK, stop =
 * start of the next event), at the array's ']' (ST_END, stop = end of the last event, or
 * the ']' itself after a trailing comma, which Perfetto accepts),
 * when data ends inside an event (ST_INCOMPLETE, stop = that event's start) or at what it
 * does not take (ST_STOPPED, stop = start of that event, err_pos/message say why).
 */
static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t start, limit;
    PyObject *strings_cap, *tracks_cap;
    if (!PyArg_ParseTuple(args, "y*nnOO", &view, &start, &limit, &strings_cap, &tracks_cap)) return NULL;
    Interner *strings = PyCapsule_GetPointer(strings_cap, INTERNER);
    Interner *tracks = strings ? PyCapsule_GetPointer(tracks_cap, INTERNER) : NULL;
    if (!tracks) { PyBuffer_Release(&view); return NULL; }
    if (start < 0 || start > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "start outside the data");
        return NULL;
    }

    Parser p = {(const unsigned char *)view.buf + start, view.len - start, 0, 0, -1, NULL, 0, NULL};
    /* Rows go straight into the bytearray returned, sized for an event every 200 bytes of the run
     * (denser than Kineto's events are on average) and grown with the GIL for denser runs. Far
     * more room than that touches more pages over a whole annotate run: the heap's reuse of
     * freed rows (glibc's mmap threshold) depends on their size. */
    const Py_ssize_t row_bytes = NFIELDS * sizeof(int64_t);
    Py_ssize_t cap = (limit < p.n ? limit : p.n) / 200 + 64, count = 0, stop = 0, keycap = 256;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, cap * row_bytes);
    char *keybuf = PyMem_RawMalloc(keycap);
    int status = ST_OK, grow_failed = 0;
    if (!out || !keybuf) { Py_XDECREF(out); PyMem_RawFree(keybuf); PyBuffer_Release(&view); return PyErr_NoMemory(); }
    int64_t *rows = (int64_t *)PyByteArray_AS_STRING(out);
    p.released = PyEval_SaveThread();  /* (de)compression threads run meanwhile */

    skip_ws(&p);
    for (;;) {
        Py_ssize_t at = p.pos;
        if (at >= p.n) { status = ST_INCOMPLETE; break; }
        if (p.b[at] == ']' && count) { status = ST_END; p.err_pos = at; break; }  /* a trailing comma */
        if (p.b[at] != '{') { fail(&p, "expected an event (an object)"); status = ST_STOPPED; break; }
        if (count == cap) {
            PyEval_RestoreThread(p.released);
            grow_failed = PyByteArray_Resize(out, cap * 2 * row_bytes) < 0;
            p.released = PyEval_SaveThread();
            if (grow_failed) break;
            rows = (int64_t *)PyByteArray_AS_STRING(out);
            cap *= 2;
        }
        p.depth = 0;
        if (parse_event(&p, rows + count * NFIELDS, strings, tracks, &keybuf, &keycap) < 0) {
            status = p.status;
            break;
        }
        Py_ssize_t end = p.pos;
        skip_ws(&p);
        if (p.pos >= p.n) { status = ST_INCOMPLETE; break; }  /* the separator is still to come */
        if (p.b[p.pos] == ']') { count++; stop = end; status = ST_END; p.err_pos = p.pos; break; }
        if (p.b[p.pos] != ',') { fail(&p, "expected ',' or ']' after an event"); status = ST_STOPPED; break; }
        p.pos++;
        skip_ws(&p);
        count++;
        stop = p.pos;
        if (p.pos >= limit) { status = ST_OK; break; }
    }
    PyEval_RestoreThread(p.released);
    PyMem_RawFree(keybuf);
    PyBuffer_Release(&view);
    if (PyErr_Occurred() || PyByteArray_Resize(out, count * row_bytes) < 0) { Py_DECREF(out); return NULL; }
    return Py_BuildValue("innnzN", status, count, stop, p.err_pos, p.msg, out);
}

/* columns(rows, at, fields) -> bytes: field fields[j] of rows at[i] (int64 row numbers; None:
 * every row) at (j * len(at) + i) * 8, one column after another. One pass over the rows: they
 * are NFIELDS ints wide, so taking a column at a time reads every row's cache lines again. */
static PyObject *columns(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer rows, fields, at = {0};
    PyObject *at_arg;
    if (!PyArg_ParseTuple(args, "y*Oy*", &rows, &at_arg, &fields)) return NULL;
    PyObject *out = NULL;
    const Py_ssize_t width = NFIELDS * (Py_ssize_t)sizeof(int64_t), n = rows.len / width, k = fields.len;
    const unsigned char *f = fields.buf;
    if (rows.len % width) { PyErr_SetString(PyExc_ValueError, "rows: not a whole number of rows"); goto done; }
    for (Py_ssize_t j = 0; j < k; j++)
        if (f[j] >= NFIELDS) { PyErr_Format(PyExc_ValueError, "no field %d", (int)f[j]); goto done; }
    if (at_arg != Py_None && PyObject_GetBuffer(at_arg, &at, PyBUF_SIMPLE) < 0) goto done;
    Py_ssize_t m = at_arg == Py_None ? n : at.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *picked = at.buf;
    if (at_arg != Py_None) {
        if (at.len % sizeof(int64_t)) { PyErr_SetString(PyExc_ValueError, "at: int64 row numbers"); goto done; }
        for (Py_ssize_t i = 0; i < m; i++)
            if (picked[i] < 0 || picked[i] >= n) { PyErr_Format(PyExc_IndexError, "no row %lld", (long long)picked[i]); goto done; }
    }
    out = PyBytes_FromStringAndSize(NULL, k * m * (Py_ssize_t)sizeof(int64_t));
    if (!out) goto done;
    int64_t *o = (int64_t *)PyBytes_AS_STRING(out);
    const int64_t *base = rows.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < m; i++) {
        const int64_t *row = base + (picked ? picked[i] : i) * NFIELDS;
        for (Py_ssize_t j = 0; j < k; j++) o[j * m + i] = row[f[j]];
    }
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&rows);
    PyBuffer_Release(&fields);
    if (at.obj) PyBuffer_Release(&at);
    return out;
}

static Interner *interner_arg(PyObject *capsule) {
    return PyCapsule_GetPointer(capsule, INTERNER);
}

/* count(interner) -> how many strings it holds. */
static PyObject *count_strings(PyObject *self, PyObject *capsule) {
    (void)self;
    Interner *in = interner_arg(capsule);
    return in ? PyLong_FromSsize_t(in->count) : NULL;
}

/* strings(interner, first, stop) -> the strings of ids first .. stop - 1 (clipped), as bytes. */
static PyObject *strings_of(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule;
    Py_ssize_t first, stop;
    if (!PyArg_ParseTuple(args, "Onn", &capsule, &first, &stop)) return NULL;
    Interner *in = interner_arg(capsule);
    if (!in) return NULL;
    if (first < 0) first = 0;
    if (stop > in->count) stop = in->count;
    PyObject *out = PyList_New(stop > first ? stop - first : 0);
    if (!out) return NULL;
    for (Py_ssize_t i = first; i < stop; i++) {
        PyObject *v = PyBytes_FromStringAndSize(text_of(in, (int32_t)i), in->len[i]);
        if (!v) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, i - first, v);
    }
    return out;
}

/* find(interner, text) -> its id, or -1 where it holds no such string (none is added). */
static PyObject *find_one(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule;
    const char *p;
    Py_ssize_t n, slot;
    if (!PyArg_ParseTuple(args, "Oy#", &capsule, &p, &n)) return NULL;
    Interner *in = interner_arg(capsule);
    if (!in) return NULL;
    return PyLong_FromLongLong(lookup(in, p, n, hash_bytes(p, n), &slot));
}

static PyObject *intern_one(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule;
    const char *p;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "Oy#", &capsule, &p, &n)) return NULL;
    Interner *in = PyCapsule_GetPointer(capsule, INTERNER);
    if (!in) return NULL;
    int64_t id = intern_held(in, p, n);
    return id == -3 ? NULL : PyLong_FromLongLong(id);
}

/* ---- shape_keys: per CPU op, its args less the members that differ between repeats ----
 *
 * The roofline keeps each distinct shape once: an op whose args, less its per-event members
 * (ids, sequence numbers: PER_EVENT), are written as an earlier op's were has that op's shapes.
 * For each event span: the args object's members other than those, each as its raw key text,
 * ':' and raw value text, followed by ','; b"" for an event without args; None where the event
 * is not read here (a key with an escape, "args" twice or not an object, text that is not a
 * plain JSON object): the caller parses that event itself. */
static const char *const PER_EVENT[] = {
    "External id", "Ev Idx", "Record function id", "Sequence number", "Fwd thread id", "Python id",
    "Python parent id", NULL,
};

static Py_ssize_t sk_ws(const char *b, Py_ssize_t i, Py_ssize_t n) {
    while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r')) i++;
    return i;
}

/* past the string starting at b[i] == '"'; *escaped set if it holds a backslash; -1 if cut */
static Py_ssize_t sk_string(const char *b, Py_ssize_t i, Py_ssize_t n, int *escaped) {
    for (i++; i < n; i++) {
        if (b[i] == '\\') { *escaped = 1; i++; }
        else if (b[i] == '"') return i + 1;
    }
    return -1;
}

/* past the value starting at b[i]; -1 if cut or not a value */
static Py_ssize_t sk_value(const char *b, Py_ssize_t i, Py_ssize_t n) {
    int escaped = 0;
    if (i >= n) return -1;
    if (b[i] == '"') return sk_string(b, i, n, &escaped);
    if (b[i] == '{' || b[i] == '[') {
        Py_ssize_t depth = 0;
        for (; i < n; i++) {
            char c = b[i];
            if (c == '"') { i = sk_string(b, i, n, &escaped); if (i < 0) return -1; i--; }
            else if (c == '{' || c == '[') depth++;
            else if (c == '}' || c == ']') { if (--depth == 0) return i + 1; }
        }
        return -1;
    }
    Py_ssize_t start = i;
    while (i < n && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n'
           && b[i] != '\r') i++;
    return i > start ? i : -1;
}

static int sk_per_event(const char *key, Py_ssize_t len) {  /* key: the text between the quotes */
    for (int k = 0; PER_EVENT[k]; k++)
        if (PER_EVENT[k][0] == key[0] && (Py_ssize_t)strlen(PER_EVENT[k]) == len && memcmp(PER_EVENT[k], key, len) == 0)
            return 1;
    return 0;
}

/* Walks the members of the object at b[i] == '{' and returns where it ends, or -1 where the caller
 * must parse the event. At the top (args == 0): the one "args" member whose value is an object is
 * walked with args == 1 (*found set), which appends its members but PER_EVENT to out. */
static Py_ssize_t sk_members(const char *b, Py_ssize_t i, Py_ssize_t n, int args, int *found, char *out,
                             Py_ssize_t *out_len) {
    if (i >= n || b[i] != '{') return -1;
    i = sk_ws(b, i + 1, n);
    if (i < n && b[i] == '}') return i + 1;
    for (;;) {
        int escaped = 0;
        if (i >= n || b[i] != '"') return -1;
        Py_ssize_t key = i, key_end = sk_string(b, i, n, &escaped);
        if (key_end < 0 || escaped) return -1;
        i = sk_ws(b, key_end, n);
        if (i >= n || b[i] != ':') return -1;
        Py_ssize_t value = sk_ws(b, i + 1, n), value_end;
        if (!args && key_end - key == 6 && memcmp(b + key, "\"args\"", 6) == 0) {
            if (*found || value >= n || b[value] != '{') return -1;
            *found = 1;
            value_end = sk_members(b, value, n, 1, found, out, out_len);
        } else {
            value_end = sk_value(b, value, n);
        }
        if (value_end < 0) return -1;
        if (args && !sk_per_event(b + key + 1, key_end - key - 2)) {
            memcpy(out + *out_len, b + key, key_end - key);
            *out_len += key_end - key;
            out[(*out_len)++] = ':';
            memcpy(out + *out_len, b + value, value_end - value);
            *out_len += value_end - value;
            out[(*out_len)++] = ',';
        }
        i = sk_ws(b, value_end, n);
        if (i < n && b[i] == '}') return i + 1;
        if (i >= n || b[i] != ',') return -1;
        i = sk_ws(b, i + 1, n);
    }
}

/* shape_keys(data, spans, seen, out): per event span (int64 pairs), its key looked up in dict seen
 * (bytes -> int): out[i] (int32) is its value where seen has the key, else -2. Returns the events
 * seen lacks, as a list of (i, key), key None where the caller parses the event. */
static PyObject *shape_keys(PyObject *self, PyObject *args) {
    PyObject *data_arg, *spans_arg, *seen, *out_arg, *missing = NULL;
    Py_buffer data = {0}, spans = {0}, out = {0};
    char *scratch = NULL;
    if (!PyArg_ParseTuple(args, "OOO!O", &data_arg, &spans_arg, &PyDict_Type, &seen, &out_arg)) return NULL;
    if (PyObject_GetBuffer(data_arg, &data, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(spans_arg, &spans, PyBUF_SIMPLE) < 0) goto done;
    if (PyObject_GetBuffer(out_arg, &out, PyBUF_WRITABLE) < 0) goto done;
    if (spans.len % (2 * sizeof(int64_t))) { PyErr_SetString(PyExc_ValueError, "spans: pairs of int64"); goto done; }
    Py_ssize_t count = spans.len / (2 * sizeof(int64_t));
    if (out.len != count * (Py_ssize_t)sizeof(int32_t)) { PyErr_SetString(PyExc_ValueError, "out: an int32 per span"); goto done; }
    const int64_t *span = (const int64_t *)spans.buf;
    int32_t *ids = (int32_t *)out.buf;
    const char *b = (const char *)data.buf;
    missing = PyList_New(0);
    if (!missing) goto done;
    Py_ssize_t cap = 0;
    for (Py_ssize_t e = 0; e < count; e++) {
        int64_t lo = span[2 * e], hi = span[2 * e + 1];
        PyObject *key;
        if (lo < 0 || hi < lo || hi > data.len) { PyErr_SetString(PyExc_ValueError, "span outside the data"); goto fail; }
        if (hi - lo + 2 > cap) {  /* the members less their separators are no longer than the event */
            cap = 2 * (hi - lo) + 2;
            char *grown = PyMem_Realloc(scratch, cap);
            if (!grown) { PyErr_NoMemory(); goto fail; }
            scratch = grown;
        }
        Py_ssize_t len = 0;
        int found = 0;
        if (sk_members(b, sk_ws(b, lo, hi), hi, 0, &found, scratch, &len) < 0) { Py_INCREF(Py_None); key = Py_None; }
        else {
            key = PyBytes_FromStringAndSize(scratch, len);  /* b"" without args */
            if (!key) goto fail;
            PyObject *id = PyDict_GetItemWithError(seen, key);
            if (id) {
                long v = PyLong_AsLong(id);
                Py_DECREF(key);
                if (v == -1 && PyErr_Occurred()) goto fail;
                ids[e] = (int32_t)v;
                continue;
            }
            if (PyErr_Occurred()) { Py_DECREF(key); goto fail; }
        }
        ids[e] = -2;
        PyObject *pair = Py_BuildValue("(nN)", e, key);
        if (!pair || PyList_Append(missing, pair) < 0) { Py_XDECREF(pair); goto fail; }
        Py_DECREF(pair);
    }
    goto done;
fail:
    Py_CLEAR(missing);
done:
    PyMem_Free(scratch);
    if (out.obj) PyBuffer_Release(&out);
    if (spans.obj) PyBuffer_Release(&spans);
    PyBuffer_Release(&data);
    return missing;
}

static PyMethodDef methods[] = {
    {"intern", intern_one, METH_VARARGS, "The id of a byte string in an Interner (added if new)."},
    {"columns", columns, METH_VARARGS, "columns(rows, at, fields) -> those fields of rows `at`, a column after another (int64)."},
    {"scan", scan, METH_VARARGS, "Scan a run of events: (status, count, stop, err_pos, message, rows)."},
    {"shape_keys", shape_keys, METH_VARARGS, "shape_keys(data, spans, seen, out) -> [(i, key)]: per event span (int64 pairs), its args less the "
     "per-event members (b\"\" without args, None where the caller parses it) looked up in seen: out[i] its id, or -2 "
     "and (i, key) listed."},
    {"Interner", new_interner, METH_VARARGS, "Interner(store=None): byte strings to dense ids; their bytes past the first "
     "chunk in buffers store(nbytes) gives (writable, at least nbytes long), else on the heap."},
    {"count", count_strings, METH_O, "count(interner) -> how many strings it holds."},
    {"strings", strings_of, METH_VARARGS, "strings(interner, first, stop) -> the strings of those ids (clipped), as bytes."},
    {"find", find_one, METH_VARARGS, "find(interner, text) -> its id, or -1 where it holds no such string (none is added)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scanner", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__scanner(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    static const struct { const char *name; long value; } constants[] = {
        {"NFIELDS", NFIELDS}, {"START", FIELD_START}, {"END", FIELD_END}, {"PH", FIELD_PH},
        {"CAT", FIELD_CAT}, {"NAME", FIELD_NAME}, {"TRACK", FIELD_TRACK}, {"TS", FIELD_TS},
        {"DUR", FIELD_DUR}, {"FLAGS", FIELD_FLAGS}, {"ID", FIELD_ID}, {"ARGS_AT", FIELD_ARGS_AT},
        {"CORRELATION", FIELD_CORRELATION}, {"DEVICE", FIELD_DEVICE},
        {"STREAM", FIELD_STREAM}, {"BYTES", FIELD_BYTES}, {"KERNEL", FIELD_KERNEL}, {"GRID", FIELD_GRID},
        {"BLOCK", FIELD_BLOCK}, {"EXTERNAL_ID", FIELD_EXTERNAL_ID}, {"SHARED_MEMORY", FIELD_SHARED_MEMORY},
        {"ALLOCATED", FIELD_ALLOCATED}, {"RESERVED", FIELD_RESERVED}, {"DEVICE_TYPE", FIELD_DEVICE_TYPE},
        {"F_ALLOCATED", F_ALLOCATED}, {"F_RESERVED", F_RESERVED}, {"F_DEVICE_TYPE", F_DEVICE_TYPE},
        {"TS_AT", FIELD_TS_AT}, {"TS_END", FIELD_TS_END},
        {"F_EXTERNAL_ID", F_EXTERNAL_ID}, {"F_SHARED_MEMORY", F_SHARED_MEMORY},
        {"F_TS", F_TS}, {"F_DUR", F_DUR}, {"F_ODD", F_ODD}, {"F_ID", F_ID},
        {"F_ARGS", F_ARGS}, {"F_CORRELATION", F_CORRELATION}, {"F_DEVICE", F_DEVICE},
        {"F_STREAM", F_STREAM}, {"F_BYTES", F_BYTES}, {"F_DIMS", F_DIMS}, {"F_ARGS_EMPTY", F_ARGS_EMPTY},
        {"F_TS_FRAC", F_TS_FRAC}, {"F_DUR_FRAC", F_DUR_FRAC}, {"F_DUR_KEY", F_DUR_KEY}, {"F_EXTRA", F_EXTRA},
        {"F_BP_E", F_BP_E}, {"F_ARGS_ONE_NUMBER", F_ARGS_ONE_NUMBER}, {"F_ID_KEY", F_ID_KEY}, {"F_SCOPE_T", F_SCOPE_T},
        {"OK", ST_OK}, {"END_OF_ARRAY", ST_END}, {"INCOMPLETE", ST_INCOMPLETE}, {"STOPPED", ST_STOPPED},
        {"MAX_DEPTH", MAX_DEPTH},
    };
    for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++)
        if (PyModule_AddIntConstant(m, constants[i].name, constants[i].value) < 0) return NULL;
    return m;
}
