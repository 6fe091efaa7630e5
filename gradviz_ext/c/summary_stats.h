/* The statistics of a tensor summary in one pass: the sum, the sum of squares, the min and the
 * max of a C-contiguous float32 or float64 array, in double precision, bit for bit what numpy
 * gives for np.add.reduce(x.astype(float64)) and np.add.reduce(x64 * x64).
 *
 * Note [Summary kernel] in gradviz/instrument/_summary.py says why: a summary took five numpy
 * passes over a float64 copy (about 100 us for a 128 KiB gradient), and the debugger makes
 * one per gradient of the pass: most of its cost on a real model. This reads the array once
 * and allocates nothing. The sums replay numpy's pairwise summation (pairwise_sum in numpy's
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

#define GRADVIZ_PAIRWISE(name, type)                                                      \
    static inline void name(const type *a, Py_ssize_t n, double *sum, double *squares,           \
                     double *lo, double *hi) {                                            \
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
            /* per-lane min and max too: no chain through one variable, so the lanes    */ \
            /* vectorize                                                                 */ \
            double r[8], p[8], l[8], h[8], s, q, low, high;                              \
            for (j = 0; j < 8; j++) {                                                     \
                v = (double)a[j];                                                         \
                r[j] = v;                                                                 \
                p[j] = v * v;                                                             \
                l[j] = v;                                                                 \
                h[j] = v;                                                                 \
            }                                                                             \
            for (i = 8; i < n - (n % 8); i += 8) {                                        \
                for (j = 0; j < 8; j++) {                                                 \
                    v = (double)a[i + j];                                                 \
                    r[j] += v;                                                            \
                    p[j] += v * v;                                                        \
                    l[j] = v < l[j] ? v : l[j];                                           \
                    h[j] = v > h[j] ? v : h[j];                                           \
                }                                                                         \
            }                                                                             \
            s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));        \
            q = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));        \
            low = *lo;                                                                    \
            high = *hi;                                                                   \
            for (j = 0; j < 8; j++) {                                                     \
                low = l[j] < low ? l[j] : low;                                            \
                high = h[j] > high ? h[j] : high;                                         \
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

#endif  /* GRADVIZ_SUMMARY_STATS_H */
