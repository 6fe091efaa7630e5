/* The rows of np.add.at(out, index, values) for a vector of row indices into C-contiguous
 * float32 or float64 rows, as _scatter_add.py's add_rows sums them (Note [Adding rows in
 * order] in gradviz/ops/_scatter_add.py): there a (rounds, targets, ...) array holding each
 * target's current row, then its entries in index order (padded with -0.0), is reduced over
 * its first axis from -0.0, the exact additive identity: ((out[t] + v1) + v2) ..., add.at's
 * sums (and PyTorch's: a -0.0 in out plus -0.0 values stays -0.0). Here the same additions,
 * one IEEE operation per element in the dtype, in that order, row after row, without the
 * array; and the same choice of when the rounds are not worth it (one target taking most
 * entries), which the caller then handles as before. Values holding
 * a NaN are left to the caller too: of two NaN operands an addition gives one, which one
 * depends on how the compiler (numpy's, this one's) ordered a vectorized addition's operands,
 * and numpy's choice varies with the column. Without NaN values at most one operand is ever
 * NaN (the sum, from the input or an infinity's overflow), and every order gives its bits.
 */
#ifndef GRADVIZ_ADD_ROWS_H
#define GRADVIZ_ADD_ROWS_H

#include "exact_arithmetic.h"

GRADVIZ_EXACT_BEGIN

/* counts: rows zeros (scratch). 0: added; 1: nothing written, a NaN value, or the rounds would
 * be more than 4 * count + 64 rows (add_rows's test); -1: nothing written, an index outside
 * [-rows, rows) */
#define GRADVIZ_ADD_ROWS(name, type)                                                        \
    static inline int name(type *out, Py_ssize_t rows, const long long *index,              \
                           Py_ssize_t count, const type *values, Py_ssize_t width,          \
                           Py_ssize_t *counts) {                                            \
        Py_ssize_t i, j, t, longest = 0, targets = 0;                                      \
        for (i = 0; i < count; i++)                                                        \
            if (index[i] < -rows || index[i] >= rows) return -1;                           \
        for (i = 0; i < count * width; i++)                                                \
            if (values[i] != values[i]) return 1;                                          \
        for (i = 0; i < count; i++) {                                                      \
            t = index[i] < 0 ? index[i] + rows : index[i];                                 \
            if (++counts[t] == 1) targets++;                                               \
            if (counts[t] > longest) longest = counts[t];                                  \
        }                                                                                  \
        if ((longest + 1) * targets > 4 * count + 64) return 1;                            \
        for (i = 0; i < count; i++) {                                                      \
            const type *from = values + i * width;                                         \
            type *to;                                                                      \
            t = index[i] < 0 ? index[i] + rows : index[i];                                 \
            to = out + t * width;                                                          \
            for (j = 0; j < width; j++) to[j] = to[j] + from[j];                           \
        }                                                                                  \
        return 0;                                                                          \
    }

GRADVIZ_ADD_ROWS(gradviz_add_rows_f32, float)
GRADVIZ_ADD_ROWS(gradviz_add_rows_f64, double)

GRADVIZ_EXACT_END

#endif  /* GRADVIZ_ADD_ROWS_H */
