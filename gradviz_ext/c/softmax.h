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
 *
 * The row maximum is a running maximum per lane of one 64-byte vector (GCC and clang vector
 * extensions, a clone per instruction set as in summary_stats.h), with a lane flag for NaN;
 * a row holding a NaN, or shorter than a vector, takes the scalar loop. A maximum does not
 * depend on the order its entries are compared in, but for the sign of a zero (max(-0.0, 0.0)),
 * and that sign never reaches the result: x - 0.0 and x - -0.0 differ only in the sign of a
 * zero, and exp gives 1 for both. On attention's rows of 32 float32 entries (a (16, 4, 32, 32)
 * tensor) the shift pass took 100 us with the branching scalar loop, of the kernel's 140, and
 * takes 20 with the vector one.
 *
 * log_softmax shares the shift; its row sums of exp (numpy's exp) are the same pairwise sums,
 * and the subtraction of the row's log-sum (numpy's log) a pass of its own.
 */
#ifndef GRADVIZ_SOFTMAX_H
#define GRADVIZ_SOFTMAX_H

#include <string.h>

#include "layer_norm.h"  /* numpy's pairwise sum in the dtype */

#include "summary_stats.h"  /* GRADVIZ_VECTOR_CLONES */

#include "exact_arithmetic.h"

GRADVIZ_EXACT_BEGIN

typedef float gradviz_v16f __attribute__((vector_size(64)));
typedef int gradviz_v16i __attribute__((vector_size(64)));

/* The maximum of row[0:n] as np.max gives it (NaN if the row holds one), n >= 1 (see above) */
#define GRADVIZ_ROW_MAX(name, type, vector, mask, lanes)                                    \
    GRADVIZ_VECTOR_CLONES static type name(const type *row, Py_ssize_t n) {                \
        Py_ssize_t j;                                                                      \
        type m = row[0];                                                                   \
        if (n >= (lanes)) {                                                                \
            vector top, w;                                                                 \
            mask larger, nan;                                                              \
            int k, any_nan = 0;                                                            \
            memcpy(&top, row, sizeof top);                                                 \
            nan = top != top;                                                              \
            for (j = (lanes); j < n; j += (lanes)) {                                       \
                /* the last vector ends at the row's end, overlapping the one before */    \
                memcpy(&w, row + (j + (lanes) <= n ? j : n - (lanes)), sizeof w);          \
                larger = w > top;                                                          \
                top = (vector)(((mask)w & larger) | ((mask)top & ~larger));                \
                nan |= w != w;                                                             \
            }                                                                              \
            for (k = 0; k < (lanes); k++) any_nan |= nan[k] != 0;                          \
            if (!any_nan) {                                                                \
                m = top[0];                                                                \
                for (k = 1; k < (lanes); k++) m = top[k] > m ? top[k] : m;                 \
                return m;                                                                  \
            }                                                                              \
        }                                                                                  \
        for (j = 1; j < n; j++) m = (m >= row[j] || m != m) ? m : row[j];                 \
        return m;                                                                          \
    }

GRADVIZ_ROW_MAX(gradviz_row_max_f32, float, gradviz_v16f, gradviz_v16i, 16)
GRADVIZ_ROW_MAX(gradviz_row_max_f64, double, gradviz_v8d, gradviz_v8l, 8)

#define GRADVIZ_SOFTMAX(shift, scale, backward, type, pairwise, row_max)                   \
    static inline void shift(const type *x, Py_ssize_t rows, Py_ssize_t n, type *out) {    \
        Py_ssize_t r, j;                                                                   \
        for (r = 0; r < rows; r++) {                                                       \
            const type *in = x + r * n;                                                    \
            type *to = out + r * n;                                                        \
            const type m = row_max(in, n);                                                 \
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
                gradviz_softmax_backward_f32, float, gradviz_pairwise_float,
                gradviz_row_max_f32)
GRADVIZ_SOFTMAX(gradviz_softmax_shift_f64, gradviz_softmax_scale_f64,
                gradviz_softmax_backward_f64, double, gradviz_pairwise_double,
                gradviz_row_max_f64)

/* log_softmax's end, after numpy's exp of the shifted rows: the row sums of e (np.sum over
 * the last dim), and the subtraction of each row's log-sum (np.log's, computed between the two)
 * from the shifted row */
#define GRADVIZ_LOG_SOFTMAX(row_sums, subtract_rows, type, pairwise)                        \
    static inline void row_sums(const type *e, Py_ssize_t rows, Py_ssize_t n, type *sums) { \
        Py_ssize_t r;                                                                      \
        for (r = 0; r < rows; r++) {                                                       \
            const type zero = 0.0;                                                         \
            sums[r] = zero + pairwise(e + r * n, n);                                       \
        }                                                                                  \
    }                                                                                      \
    static inline void subtract_rows(type *x, const type *by, Py_ssize_t rows,             \
                                     Py_ssize_t n) {                                       \
        Py_ssize_t r, j;                                                                   \
        for (r = 0; r < rows; r++) {                                                       \
            type *row = x + r * n;                                                         \
            const type b = by[r];                                                          \
            for (j = 0; j < n; j++) row[j] = row[j] - b;                                   \
        }                                                                                  \
    }

GRADVIZ_LOG_SOFTMAX(gradviz_row_sums_f32, gradviz_subtract_rows_f32, float,
                    gradviz_pairwise_float)
GRADVIZ_LOG_SOFTMAX(gradviz_row_sums_f64, gradviz_subtract_rows_f64, double,
                    gradviz_pairwise_double)

GRADVIZ_EXACT_END

#endif  /* GRADVIZ_SOFTMAX_H */
