/* The statistics of a tensor summary in one pass: the sum, the sum of squares, the min and the
 * max of a C-contiguous float32 or float64 array, in double precision, bit for bit what numpy
 * gives for np.add.reduce(x.astype(float64)) and np.add.reduce(x64 * x64).
 *
 * Note [Summary kernel] in gradviz/instrument/_summary.py says why: a summary took five numpy
 * passes over a float64 copy (about 100 us for a 128 KiB gradient), and the debugger makes
 * one per gradient of the pass: most of its cost on a real model. This reads the array once
 * and allocates nothing (2.8x faster again with the lanes as vectors: 0.28 ns per float32 entry
 * against 0.78 on this project's development machine). The sums replay numpy's pairwise summation (pairwise_sum in numpy's
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

/* Four doubles as one value (GCC and clang vector extensions): four lanes per instruction, each
   lane computing what numpy computes for it, in the same order. With AVX2 (a clone chosen at
   load time where the CPU has it; GCC on x86-64 Linux) one ymm register; otherwise two SSE2
   ones. */
typedef double gradviz_v4d __attribute__((vector_size(32)));
typedef long long gradviz_v4l __attribute__((vector_size(32)));

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define GRADVIZ_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define GRADVIZ_VECTOR_CLONES
#endif

#include "exact_arithmetic.h"

GRADVIZ_EXACT_BEGIN

#define GRADVIZ_PAIRWISE(name, type)                                                      \
    GRADVIZ_VECTOR_CLONES static void name(const type *a, Py_ssize_t n, double *sum,       \
                                           double *squares, double *lo, double *hi) {     \
        Py_ssize_t i;                                                                     \
        int j;                                                                            \
        double v;                                                                         \
        if (n < 8) {                                                                      \
            double s = -0.0, q = -0.0;                                                    \
            for (i = 0; i < n; i++) {                                                     \
                v = (double)a[i];                                                         \
                s += v;                                                                   \
                q += v * v;                                                               \
                *lo = v < *lo ? v : *lo;                                                  \
                *hi = v > *hi ? v : *hi;                                                  \
            }                                                                             \
            *sum = s;                                                                     \
            *squares = q;                                                                 \
        } else if (n <= GRADVIZ_PAIRWISE_BLOCK) {                                         \
            /* the eight running sums (and a min and max per lane) as two 4-wide vectors: \
               the same operations per lane as numpy's r[0..7], one instruction per four */\
            gradviz_v4d r0, r1, p0, p1, l0, l1, h0, h1, v0, v1;                           \
            gradviz_v4l m0, m1;                                                           \
            double s, q, low, high;                                                       \
            v0 = (gradviz_v4d){a[0], a[1], a[2], a[3]};                                   \
            v1 = (gradviz_v4d){a[4], a[5], a[6], a[7]};                                   \
            r0 = v0; r1 = v1; p0 = v0 * v0; p1 = v1 * v1;                                 \
            l0 = h0 = v0; l1 = h1 = v1;                                                   \
            for (i = 8; i < n - (n % 8); i += 8) {                                        \
                v0 = (gradviz_v4d){a[i], a[i + 1], a[i + 2], a[i + 3]};                   \
                v1 = (gradviz_v4d){a[i + 4], a[i + 5], a[i + 6], a[i + 7]};               \
                r0 += v0; r1 += v1; p0 += v0 * v0; p1 += v1 * v1;                         \
                /* min and max as selects (v < l ? v : l per lane), without branches */   \
                m0 = v0 < l0; m1 = v1 < l1;                                               \
                l0 = (gradviz_v4d)(((gradviz_v4l)v0 & m0) | ((gradviz_v4l)l0 & ~m0));     \
                l1 = (gradviz_v4d)(((gradviz_v4l)v1 & m1) | ((gradviz_v4l)l1 & ~m1));     \
                m0 = v0 > h0; m1 = v1 > h1;                                               \
                h0 = (gradviz_v4d)(((gradviz_v4l)v0 & m0) | ((gradviz_v4l)h0 & ~m0));     \
                h1 = (gradviz_v4d)(((gradviz_v4l)v1 & m1) | ((gradviz_v4l)h1 & ~m1));     \
            }                                                                             \
            s = ((r0[0] + r0[1]) + (r0[2] + r0[3])) + ((r1[0] + r1[1]) + (r1[2] + r1[3]));\
            q = ((p0[0] + p0[1]) + (p0[2] + p0[3])) + ((p1[0] + p1[1]) + (p1[2] + p1[3]));\
            low = *lo;                                                                    \
            high = *hi;                                                                   \
            for (j = 0; j < 4; j++) {                                                     \
                low = l0[j] < low ? l0[j] : low;                                          \
                high = h0[j] > high ? h0[j] : high;                                       \
            }                                                                             \
            for (j = 0; j < 4; j++) {                                                     \
                low = l1[j] < low ? l1[j] : low;                                          \
                high = h1[j] > high ? h1[j] : high;                                       \
            }                                                                             \
            for (; i < n; i++) {                                                          \
                v = (double)a[i];                                                         \
                s += v;                                                                   \
                q += v * v;                                                               \
                low = v < low ? v : low;                                                  \
                high = v > high ? v : high;                                               \
            }                                                                             \
            *sum = s;                                                                     \
            *squares = q;                                                                 \
            *lo = low;                                                                    \
            *hi = high;                                                                   \
        } else {                                                                          \
            double s1, q1, s2, q2;                                                        \
            Py_ssize_t half = n / 2;                                                      \
            half -= half % 8;                                                             \
            name(a, half, &s1, &q1, lo, hi);                                              \
            name(a + half, n - half, &s2, &q2, lo, hi);                                   \
            *sum = s1 + s2;                                                               \
            *squares = q1 + q2;                                                           \
        }                                                                                 \
    }

GRADVIZ_PAIRWISE(gradviz_pairwise_f32, float)
GRADVIZ_PAIRWISE(gradviz_pairwise_f64, double)

/* out = {sum, sum of squares, min, max} of x[0:n], n >= 1 */
static inline void gradviz_stats_f32(const float *x, Py_ssize_t n, double *out) {
    out[2] = out[3] = (double)x[0];
    gradviz_pairwise_f32(x, n, &out[0], &out[1], &out[2], &out[3]);
    out[0] = 0.0 + out[0];
    out[1] = 0.0 + out[1];
}

static inline void gradviz_stats_f64(const double *x, Py_ssize_t n, double *out) {
    out[2] = out[3] = x[0];
    gradviz_pairwise_f64(x, n, &out[0], &out[1], &out[2], &out[3]);
    out[0] = 0.0 + out[0];
    out[1] = 0.0 + out[1];
}

GRADVIZ_EXACT_END

#endif  /* GRADVIZ_SUMMARY_STATS_H */
