/* Batched products of small matrices as torch's CPU kernel computes them.
 *
 * Note [Small batched products] in gradviz/ops/_linalg.py says why: torch's bmm and baddbmm
 * do not call BLAS when contraction * rows * columns < 400, but sum each output entry in a
 * plain loop, k by k from 0, one multiply and one add each (in float for float32), so a tiny
 * attention's scores differ from numpy's matmul (BLAS) in the last bits. This is that loop:
 * C-contiguous (batches, rows, inner) and (batches, inner, columns) float32 or float64
 * operands, and for baddbmm the input already broadcast to the output's shape (C-contiguous)
 * with torch's rule: beta == 0 ignores it (NaN included), otherwise input * beta + alpha *
 * sum. No fused multiply-add (exact_arithmetic.h), as torch's loop has none.
 */
#ifndef GRADVIZ_SMALL_BMM_H
#define GRADVIZ_SMALL_BMM_H

#include "exact_arithmetic.h"

GRADVIZ_EXACT_BEGIN

/* out[b][i][j] = sum_k a[b][i][k] * b[b][k][j]; with `input` (not NULL) the baddbmm rule.
   Each output row accumulates k by k across its columns, so every entry gets torch's sum in
   torch's order while the loop over the columns vectorizes. */
#define GRADVIZ_SMALL_BMM(name, type)                                                      \
    static inline void name(const type *a, const type *b, const type *input, type beta,     \
                            type alpha, Py_ssize_t batches, Py_ssize_t rows,               \
                            Py_ssize_t inner, Py_ssize_t columns, type *out) {             \
        Py_ssize_t batch, i, j, k;                                                         \
        for (batch = 0; batch < batches; batch++) {                                        \
            const type *a0 = a + batch * rows * inner, *b0 = b + batch * inner * columns;  \
            for (i = 0; i < rows; i++) {                                                   \
                Py_ssize_t at = (batch * rows + i) * columns;                              \
                type *row = out + at;                                                      \
                for (j = 0; j < columns; j++) row[j] = 0;                                  \
                for (k = 0; k < inner; k++) {                                              \
                    const type aik = a0[i * inner + k];                                    \
                    const type *bk = b0 + k * columns;                                     \
                    for (j = 0; j < columns; j++) row[j] += aik * bk[j];                   \
                }                                                                          \
                if (input == NULL) continue;                                               \
                if (beta == 0)                                                             \
                    for (j = 0; j < columns; j++) row[j] = alpha * row[j];                 \
                else                                                                       \
                    for (j = 0; j < columns; j++)                                          \
                        row[j] = input[at + j] * beta + alpha * row[j];                    \
            }                                                                              \
        }                                                                                  \
    }

GRADVIZ_SMALL_BMM(gradviz_small_bmm_f32, float)
GRADVIZ_SMALL_BMM(gradviz_small_bmm_f64, double)

GRADVIZ_EXACT_END

#endif  /* GRADVIZ_SMALL_BMM_H */
