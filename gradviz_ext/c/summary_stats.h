/* The statistics of a tensor summary in one pass: the sum, the sum of squares, the min and the
 * max of a C-contiguous float32 or float64 array, in double precision, bit for bit what numpy
 * gives for np.add.reduce(x.astype(float64)) and np.add.reduce(x64 * x64).
 *
 * Note [Summary kernel] in gradviz/instrument/_summary.py says why: a summary took five numpy
 * passes over a float64 copy (about 100 us for a 128 KiB gradient), and the debugger makes
 * one per gradient of the pass: most of its cost on a real model. This reads the array once
 * and allocates nothing; numpy's eight running sums are the eight lanes of one vector (0.29 ns
 * per float32 entry with AVX-512 on this project's CI machine, against 0.43 with two 4-wide
 * vectors and 0.78 scalar). The sums replay numpy's pairwise summation (pairwise_sum in numpy's
 * loops_utils.h.src): below 8 entries one running sum from -0.0; up to 128 entries eight
 * interleaved running sums combined as a tree, then the rest added in order; above 128 the
 * two halves (the first a multiple of 8 long) summed the same way and added. A reduction
 * starts from the identity, 0.0, so the caller adds 0.0 to each sum.
 * NaN and infinities are not special-cased: they make the sum non-finite, and the caller then
 * takes numpy's reference path, as it does for a sum that overflowed.
 */
#ifndef GRADVIZ_SUMMARY_STATS_H
#define GRADVIZ_SUMMARY_STATS_H

#define GRADVIZ_PAIRWISE_BLOCK 128

/* Eight doubles as one value (GCC and clang vector extensions): numpy's eight running sums are
   its eight lanes, each lane computing what numpy computes for it, in the same order, one
   instruction for all eight. A clone is chosen at load time (GCC on x86-64 Linux): with AVX-512
   one zmm register, with AVX2 two ymm ones, otherwise four SSE2 ones. */
typedef double gradviz_v8d __attribute__((vector_size(64)));
typedef long long gradviz_v8l __attribute__((vector_size(64)));

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define GRADVIZ_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GRADVIZ_VECTOR_CLONES
#endif

/* a[i..i+7] as doubles */
#define GRADVIZ_LOAD8(a, i)                                                                \
    ((gradviz_v8d){a[i], a[i + 1], a[i + 2], a[i + 3], a[i + 4], a[i + 5], a[i + 6], a[i + 7]})

#include "exact_arithmetic.h"

GRADVIZ_EXACT_BEGIN

/* The running minimum and maximum: per lane over the 8-entry groups of every block (the order
   does not matter to a minimum, and finite values have no NaN to care for), and one scalar
   pair for the entries outside whole groups; folded together once, at the end. */
typedef struct {
    gradviz_v8d lo, hi;
    double low, high;
} gradviz_extrema;

#define GRADVIZ_PAIRWISE(name, type)                                                      \
    GRADVIZ_VECTOR_CLONES static void name(const type *a, Py_ssize_t n, double *sum,       \
                                           double *squares, gradviz_extrema *e) {         \
        Py_ssize_t i;                                                                     \
        double v;                                                                         \
        if (n < 8) {                                                                      \
            double s = -0.0, q = -0.0;                                                    \
            for (i = 0; i < n; i++) {                                                     \
                v = (double)a[i];                                                         \
                s += v;                                                                   \
                q += v * v;                                                               \
                e->low = v < e->low ? v : e->low;                                         \
                e->high = v > e->high ? v : e->high;                                      \
            }                                                                             \
            *sum = s;                                                                     \
            *squares = q;                                                                 \
        } else if (n <= GRADVIZ_PAIRWISE_BLOCK) {                                         \
            /* numpy's r[0..7] as one 8-wide vector, and the lanes' minima and maxima */  \
            gradviz_v8d r, p, l = e->lo, h = e->hi, w;                                    \
            gradviz_v8l m;                                                                \
            double s, q;                                                                  \
            w = GRADVIZ_LOAD8(a, 0);                                                      \
            r = w;                                                                        \
            p = w * w;                                                                    \
            for (i = 8;; i += 8) {                                                        \
                /* min and max as selects (w < l ? w : l per lane), without branches */   \
                m = w < l;                                                                \
                l = (gradviz_v8d)(((gradviz_v8l)w & m) | ((gradviz_v8l)l & ~m));          \
                m = w > h;                                                                \
                h = (gradviz_v8d)(((gradviz_v8l)w & m) | ((gradviz_v8l)h & ~m));          \
                if (i >= n - (n % 8))                                                     \
                    break;                                                                \
                w = GRADVIZ_LOAD8(a, i);                                                  \
                r += w;                                                                   \
                p += w * w;                                                               \
            }                                                                             \
            e->lo = l;                                                                    \
            e->hi = h;                                                                    \
            s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));        \
            q = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));        \
            for (; i < n; i++) {                                                          \
                v = (double)a[i];                                                         \
                s += v;                                                                   \
                q += v * v;                                                               \
                e->low = v < e->low ? v : e->low;                                         \
                e->high = v > e->high ? v : e->high;                                      \
            }                                                                             \
            *sum = s;                                                                     \
            *squares = q;                                                                 \
        } else {                                                                          \
            double s1, q1, s2, q2;                                                        \
            Py_ssize_t half = n / 2;                                                      \
            half -= half % 8;                                                             \
            name(a, half, &s1, &q1, e);                                                   \
            name(a + half, n - half, &s2, &q2, e);                                        \
            *sum = s1 + s2;                                                               \
            *squares = q1 + q2;                                                           \
        }                                                                                 \
    }

GRADVIZ_PAIRWISE(gradviz_pairwise_f32, float)
GRADVIZ_PAIRWISE(gradviz_pairwise_f64, double)

/* out = {sum, sum of squares, min, max}, from the pairwise sums and the extrema */
static inline void gradviz_stats_finish(double *out, const gradviz_extrema *e) {
    int j;
    out[0] = 0.0 + out[0];
    out[1] = 0.0 + out[1];
    out[2] = e->low;
    out[3] = e->high;
    for (j = 0; j < 8; j++) {
        out[2] = e->lo[j] < out[2] ? e->lo[j] : out[2];
        out[3] = e->hi[j] > out[3] ? e->hi[j] : out[3];
    }
}

/* out = {sum, sum of squares, min, max} of x[0:n], n >= 1 */
static inline void gradviz_stats_f32(const float *x, Py_ssize_t n, double *out) {
    gradviz_extrema e;
    e.low = e.high = (double)x[0];
    e.lo = e.hi = (gradviz_v8d){0} + e.low;
    gradviz_pairwise_f32(x, n, &out[0], &out[1], &e);
    gradviz_stats_finish(out, &e);
}

static inline void gradviz_stats_f64(const double *x, Py_ssize_t n, double *out) {
    gradviz_extrema e;
    e.low = e.high = x[0];
    e.lo = e.hi = (gradviz_v8d){0} + e.low;
    gradviz_pairwise_f64(x, n, &out[0], &out[1], &e);
    gradviz_stats_finish(out, &e);
}

GRADVIZ_EXACT_END

#endif  /* GRADVIZ_SUMMARY_STATS_H */
