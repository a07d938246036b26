/* What the extensions need beyond ISO C, for GCC and Clang (builtins), MSVC (intrinsics)
 * and any other C99 compiler (plain C), plus the SIMD paths each target may take.
 *
 * Include after Python.h. Macros that change what is compiled, for tests on one machine:
 *   TRACEFORGE_GENERIC_C  the plain C versions of everything (no builtins, no __int128, own
 *                         memmem), as a compiler that is neither GCC/Clang nor MSVC gets
 *   TRACEFORGE_NO_SIMD    no SSE2 or AVX2 code: the scalar loops arm64 runs
 *
 * Bit scans take a non-zero argument, as the builtins do.
 */
#ifndef TRACEFORGE_PORTABLE_H
#define TRACEFORGE_PORTABLE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(TRACEFORGE_GENERIC_C)
#define TF_GENERIC 1
#elif defined(_MSC_VER) /* MSVC, and clang-cl, which has its intrinsics too */
#define TF_MSVC 1
#include <intrin.h>
#include <stdlib.h>
#elif defined(__GNUC__) || defined(__clang__)
#define TF_GNU 1
#else
#define TF_GENERIC 1
#endif

/* ---- inlining -------------------------------------------------------------------------- */

#if defined(TF_GNU)
#define TF_NOINLINE __attribute__((noinline))
#define TF_ALWAYS_INLINE inline __attribute__((always_inline))
#elif defined(TF_MSVC)
#define TF_NOINLINE __declspec(noinline)
#define TF_ALWAYS_INLINE __forceinline
#else
#define TF_NOINLINE
#define TF_ALWAYS_INLINE inline
#endif

/* ---- bit scans and byte order ------------------------------------------------------------ */

/* The number of trailing zero bits of x != 0. */
static inline int tf_ctz32(uint32_t x) {
#if defined(TF_GNU)
    return __builtin_ctz(x);
#elif defined(TF_MSVC)
    unsigned long i;
    _BitScanForward(&i, x);
    return (int)i;
#else
    int n = 0;
    if (!(x & 0xFFFFu)) { n += 16; x >>= 16; }
    if (!(x & 0xFFu)) { n += 8; x >>= 8; }
    if (!(x & 0xFu)) { n += 4; x >>= 4; }
    if (!(x & 0x3u)) { n += 2; x >>= 2; }
    return n + !(x & 1u);
#endif
}

/* The number of trailing zero bits of x != 0. */
static inline int tf_ctz64(uint64_t x) {
#if defined(TF_GNU)
    return __builtin_ctzll(x);
#elif defined(TF_MSVC) && (defined(_M_X64) || defined(_M_ARM64))
    unsigned long i;
    _BitScanForward64(&i, x);
    return (int)i;
#else
    return (uint32_t)x ? tf_ctz32((uint32_t)x) : 32 + tf_ctz32((uint32_t)(x >> 32));
#endif
}

/* The number of leading zero bits of x != 0. */
static inline int tf_clz64(uint64_t x) {
#if defined(TF_GNU)
    return __builtin_clzll(x);
#elif defined(TF_MSVC) && (defined(_M_X64) || defined(_M_ARM64))
    unsigned long i;
    _BitScanReverse64(&i, x);
    return 63 - (int)i;
#elif defined(TF_MSVC)
    unsigned long i;
    if (x >> 32) { _BitScanReverse(&i, (unsigned long)(x >> 32)); return 31 - (int)i; }
    _BitScanReverse(&i, (unsigned long)x);
    return 63 - (int)i;
#else
    int n = 0;
    if (!(x >> 32)) { n += 32; x <<= 32; }
    if (!(x >> 48)) { n += 16; x <<= 16; }
    if (!(x >> 56)) { n += 8; x <<= 8; }
    if (!(x >> 60)) { n += 4; x <<= 4; }
    if (!(x >> 62)) { n += 2; x <<= 2; }
    return n + !(x >> 63);
#endif
}

static inline uint64_t tf_bswap64(uint64_t x) {
#if defined(TF_GNU)
    return __builtin_bswap64(x);
#elif defined(TF_MSVC)
    return _byteswap_uint64(x);
#else
    x = ((x & 0x00FF00FF00FF00FFULL) << 8) | ((x >> 8) & 0x00FF00FF00FF00FFULL);
    x = ((x & 0x0000FFFF0000FFFFULL) << 16) | ((x >> 16) & 0x0000FFFF0000FFFFULL);
    return (x << 32) | (x >> 32);
#endif
}

/* PY_BIG_ENDIAN (pyport.h) says how the interpreter was configured. */
#if defined(PY_BIG_ENDIAN)
#define TF_BIG_ENDIAN PY_BIG_ENDIAN
#elif defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define TF_BIG_ENDIAN 1
#else
#define TF_BIG_ENDIAN 0
#endif

/* Eight bytes at p as an integer, the first in the low byte. */
static inline uint64_t tf_load_le64(const void *p) {
    uint64_t w;
    memcpy(&w, p, 8);
#if TF_BIG_ENDIAN
    w = tf_bswap64(w);
#endif
    return w;
}

/* ---- memmem -------------------------------------------------------------------------------- */

/* The C libraries of Linux, macOS and the BSDs have memmem (declared with _GNU_SOURCE or
 * _DARWIN_C_SOURCE, which pyconfig.h defines); elsewhere (Windows) a search of our own. */
#if !defined(TF_GENERIC) && (defined(__linux__) || defined(__APPLE__) || defined(__FreeBSD__) || \
                             defined(__NetBSD__) || defined(__OpenBSD__) || defined(__DragonFly__))
#define tf_memmem memmem
#else
static inline void *tf_memmem(const void *haystack, size_t n, const void *needle, size_t m) {
    const unsigned char *h = haystack, *k = needle;
    if (!m) return (void *)h;
    if (m > n) return NULL;
    const unsigned char *last = h + (n - m);
    for (const unsigned char *p = h; p <= last; p++) {
        p = memchr(p, k[0], (size_t)(last - p) + 1);
        if (!p) return NULL;
        if (memcmp(p + 1, k + 1, m - 1) == 0) return (void *)p;
    }
    return NULL;
}
#endif

/* ---- SIMD ---------------------------------------------------------------------------------- */

/* SSE2: every x86-64 CPU (GCC/Clang say __SSE2__, MSVC _M_X64; ARM64EC defines _M_X64 but
 * is arm64 code). Elsewhere (arm64, ...) the scalar loops. */
#if !defined(TRACEFORGE_NO_SIMD) && \
    (defined(__SSE2__) || (defined(_M_X64) && !defined(_M_ARM64EC)) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2))
#define TF_HAVE_SSE2 1
#include <emmintrin.h>
#endif

/* AVX2: only where the compiler builds single functions for it (target attribute), on
 * x86-64 with GCC or Clang (not MSVC or clang-cl: they take the SSE2 path); used only
 * after tf_cpu_has_avx2() said yes. The check reads CPUID and XGETBV itself, so nothing
 * is needed from the compiler's runtime library (__builtin_cpu_supports needs
 * __cpu_model, which a loadable module may not get). */
#if !defined(TRACEFORGE_NO_SIMD) && !defined(TF_GENERIC) && defined(TF_GNU) && !defined(_MSC_VER) && \
    defined(__x86_64__)
#define TF_HAVE_AVX2_PATH 1
#include <cpuid.h>
#include <immintrin.h>
#define TF_TARGET_AVX2 __attribute__((target("avx2")))

/* Whether the CPU has AVX2 and the OS saves the YMM registers. */
static inline int tf_cpu_has_avx2(void) {
    unsigned int a, b, c, d, xcr0_lo, xcr0_hi;
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid(1, a, b, c, d);
    if (!(c & (1u << 27)) || !(c & (1u << 28))) return 0; /* OSXSAVE, AVX */
    __asm__ __volatile__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    if ((xcr0_lo & 6) != 6) return 0; /* XMM and YMM state enabled */
    __cpuid_count(7, 0, a, b, c, d);
    return (b >> 5) & 1; /* AVX2 */
}
#endif

/* ---- 128-bit sums -------------------------------------------------------------------------- */

/* tf_wide: the exact sum of two int64 (65 bits), compared with other such values. */
#if !defined(TF_GENERIC) && defined(__SIZEOF_INT128__)
__extension__ typedef __int128 tf_wide;
static inline tf_wide tf_wide_of(int64_t v) { return v; }
static inline tf_wide tf_wide_sum(int64_t a, int64_t b) { return (tf_wide)a + b; }
static inline int tf_wide_lt(tf_wide a, tf_wide b) { return a < b; }
static inline int tf_wide_eq(tf_wide a, tf_wide b) { return a == b; }
#else
typedef struct {
    int64_t hi; /* two's complement: the value is hi * 2^64 + lo */
    uint64_t lo;
} tf_wide;
static inline tf_wide tf_wide_of(int64_t v) {
    tf_wide w;
    w.hi = v < 0 ? -1 : 0;
    w.lo = (uint64_t)v;
    return w;
}
static inline tf_wide tf_wide_sum(int64_t a, int64_t b) {
    tf_wide x = tf_wide_of(a), y = tf_wide_of(b), s;
    s.lo = x.lo + y.lo;
    s.hi = x.hi + y.hi + (s.lo < x.lo);
    return s;
}
static inline int tf_wide_lt(tf_wide a, tf_wide b) { return a.hi != b.hi ? a.hi < b.hi : a.lo < b.lo; }
static inline int tf_wide_eq(tf_wide a, tf_wide b) { return a.hi == b.hi && a.lo == b.lo; }
#endif

#endif /* TRACEFORGE_PORTABLE_H */
