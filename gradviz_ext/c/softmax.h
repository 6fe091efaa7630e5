/* Softmax over the last dim of C-contiguous float32 or float64 rows: the shift by the row's
 * maximum, the division by the row's sum, and the backward on arrays, each one pass per row,
 * with the bits of the numpy code (gradviz/ops/_activation.py, Note [Softmax kernels]).
 *
 * numpy's softmax is five calls: the row maxima, the subtraction, exp, the row sums and the
 * division; on the attention's rows of 32 entries the per-row cost of numpy's reductions is
 * most of it. exp stays numpy's (its float32 loop is numpy's own vectorized code, whose bits
 * a C library's expf does not give); the maximum and the subtraction are one pass, and the sum
 * (numpy's pairwise order in the dtype, from the identity 0) and the division another. The
 * backward, y * (g - sum(g * y)), is one pass too. NaN propagates as in numpy: a row holding a
 * NaN has a NaN maximum (np.maximum's rule), so every entry of it becomes NaN.
 */
#ifndef GRADVIZ_SOFTMAX_H
#define GRADVIZ_SOFTMAX_H

#include "layer_norm.h"  /* numpy's pairwise sum in the dtype */

#include "exact_arithmetic.h"

GRADVIZ_EXACT_BEGIN

#define GRADVIZ_SOFTMAX(shift, scale, backward, type, pairwise)                            \
    static inline void shift(const type *x, Py_ssize_t rows, Py_ssize_t n, type *out) {    \
        Py_ssize_t r, j;                                                                   \
        for (r = 0; r < rows; r++) {                                                       \
            const type *in = x + r * n;                                                    \
            type *to = out + r * n;                                                        \
            type m = in[0];                                                                \
            for (j = 1; j < n; j++) m = (m >= in[j] || m != m) ? m : in[j];               \
            for (j = 0; j < n; j++) to[j] = in[j] - m;                                     \
        }                                                                                  \
    }                                                                                      \
    static inline void scale(type *e, Py_ssize_t rows, Py_ssize_t n) {                     \
        Py_ssize_t r, j;                                                                   \
        for (r = 0; r < rows; r++) {                                                       \
            type *row = e + r * n, zero = 0.0;                                             \
            const type total = zero + pairwise(row, n);                                    \
            for (j = 0; j < n; j++) row[j] = row[j] / total;                               \
        }                                                                                  \
    }                                                                                      \
    /* scratch: n entries */                                                               \
    static inline void backward(const type *y, const type *g, Py_ssize_t rows,             \
                                Py_ssize_t n, type *out, type *scratch) {                  \
        Py_ssize_t r, j;                                                                   \
        for (r = 0; r < rows; r++) {                                                       \
            const type *yr = y + r * n, *gr = g + r * n;                                   \
            type *to = out + r * n, zero = 0.0, total;                                     \
            for (j = 0; j < n; j++) scratch[j] = gr[j] * yr[j];                            \
            total = zero + pairwise(scratch, n);                                           \
            for (j = 0; j < n; j++) {                                                      \
                to[j] = gr[j] - total;                                                     \
                to[j] = to[j] * yr[j];                                                     \
            }                                                                              \
        }                                                                                  \
    }

GRADVIZ_SOFTMAX(gradviz_softmax_shift_f32, gradviz_softmax_scale_f32,
                gradviz_softmax_backward_f32, float, gradviz_pairwise_float)
GRADVIZ_SOFTMAX(gradviz_softmax_shift_f64, gradviz_softmax_scale_f64,
                gradviz_softmax_backward_f64, double, gradviz_pairwise_double)

GRADVIZ_EXACT_END

#endif  /* GRADVIZ_SOFTMAX_H */
