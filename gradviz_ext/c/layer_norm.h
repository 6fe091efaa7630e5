/* Layer norm over the last dim of C-contiguous float32 or float64 rows, forward and backward,
 * one row at a time, with the bits of the numpy code it replaces (gradviz/ops/_nn.py,
 * _normalize_forward, _layer_norm_forward and _layer_norm_backward_arrays).
 *
 * Note [Layer norm kernel] in gradviz/ops/_nn.py says why. numpy computes, per row of n
 * entries: the mean as add.reduce in the array's dtype (numpy's pairwise summation, started
 * from the identity 0) divided by the count, an intp scalar, which numpy's type rules make a
 * float64 division rounded back to the dtype; the centered row; the mean of its squares the
 * same way; 1 / sqrt(var + eps) in the dtype (eps rounded to it first); the centered row
 * times that; then times the weight and plus the bias, each rounded. This does the same
 * operations in the same order, per row, while the row is in cache. Batch norm's training
 * backward (below) follows the same rules per channel.
 */
#ifndef GRADVIZ_LAYER_NORM_H
#define GRADVIZ_LAYER_NORM_H

#include <math.h>

#include "summary_stats.h"  /* GRADVIZ_VECTOR_CLONES */

#include "exact_arithmetic.h"

GRADVIZ_EXACT_BEGIN

/* numpy's pairwise_sum in the array's own dtype (loops_utils.h.src), contiguous; `clones`
   is empty or GRADVIZ_VECTOR_CLONES (below) */
#define GRADVIZ_DTYPE_PAIRWISE(name, type, clones)                                         \
    clones static type name(const type *a, Py_ssize_t n) {                                 \
        Py_ssize_t i;                                                                      \
        if (n < 8) {                                                                       \
            type res = -0.0;                                                               \
            for (i = 0; i < n; i++) res += a[i];                                           \
            return res;                                                                    \
        } else if (n <= 128) {                                                             \
            type r[8], res;                                                                \
            int j;                                                                         \
            for (j = 0; j < 8; j++) r[j] = a[j];                                           \
            for (i = 8; i < n - (n % 8); i += 8)                                           \
                for (j = 0; j < 8; j++) r[j] += a[i + j];                                  \
            res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));       \
            for (; i < n; i++) res += a[i];                                                \
            return res;                                                                    \
        } else {                                                                           \
            Py_ssize_t half = n / 2;                                                       \
            half -= half % 8;                                                              \
            return name(a, half) + name(a + half, n - half);                               \
        }                                                                                  \
    }

/* x, out: rows x n; weight, bias: n or NULL; mean, var, rstd: rows; squares: n scratch.
   Compiled for AVX-512, AVX2 and the baseline, chosen at load time (GRADVIZ_VECTOR_CLONES):
   each row's passes are vector loops whose lanes do the scalar loop's operations (no fused
   multiply-add, no reordered sum: numpy's eight running sums are eight lanes), so every clone
   gives the same bits; on the GPT's (512, 64) float32 rows 31 -> 19 us. The backward stays
   one compilation: its clones (and their calls to a cloned pairwise sum) were slower. */
#define GRADVIZ_LAYER_NORM(name, type, pairwise, root)                                     \
    GRADVIZ_VECTOR_CLONES static inline void name(const type *x, Py_ssize_t rows,          \
                                                  Py_ssize_t n, type eps,                  \
                                                  const type *weight, const type *bias,    \
                                                  type *out, type *mean, type *var,        \
                                                  type *rstd, type *squares) {             \
        Py_ssize_t r, j;                                                                   \
        for (r = 0; r < rows; r++) {                                                       \
            const type *in = x + r * n;                                                    \
            type *to = out + r * n;                                                        \
            type m, v, s, zero = 0.0;                                                      \
            m = (type)((double)(zero + pairwise(in, n)) / (double)n);                      \
            for (j = 0; j < n; j++) {                                                      \
                to[j] = in[j] - m;                                                         \
                squares[j] = to[j] * to[j];                                                \
            }                                                                              \
            v = (type)((double)(zero + pairwise(squares, n)) / (double)n);                 \
            s = (type)1.0 / root(v + eps);                                                  \
            for (j = 0; j < n; j++) to[j] = to[j] * s;                                     \
            if (weight != NULL)                                                            \
                for (j = 0; j < n; j++) to[j] = to[j] * weight[j];                         \
            if (bias != NULL)                                                              \
                for (j = 0; j < n; j++) to[j] = to[j] + bias[j];                           \
            mean[r] = m;                                                                   \
            var[r] = v;                                                                    \
            rstd[r] = s;                                                                   \
        }                                                                                  \
    }

/* The backward on arrays (_layer_norm_backward_arrays): per row the normalized row from the
   kept mean and rstd, the gradient times the weight, the means of it and of its product with
   the normalized row, and the input's gradient ((scaled - xhat * projection) - mean) * rstd;
   the weight's and the bias's gradients summed over the rows in row order from 0, as numpy's
   reduction over the leading dims adds them. grad_x, grad_w, grad_b may be NULL (not needed);
   scratch: 3 n entries. */
#define GRADVIZ_LAYER_NORM_BACKWARD(name, type, pairwise)                                  \
    static inline void name(const type *x, const type *g, Py_ssize_t rows, Py_ssize_t n,   \
                            const type *weight, const type *mean, const type *rstd,        \
                            type *grad_x, type *grad_w, type *grad_b, type *scratch) {     \
        type *xhat = scratch, *scaled = scratch + n, *product = scratch + 2 * n;           \
        Py_ssize_t r, j;                                                                   \
        if (grad_w != NULL) for (j = 0; j < n; j++) grad_w[j] = 0.0;                       \
        if (grad_b != NULL) for (j = 0; j < n; j++) grad_b[j] = 0.0;                       \
        for (r = 0; r < rows; r++) {                                                       \
            const type *in = x + r * n, *gr = g + r * n;                                   \
            const type m = mean[r], s = rstd[r];                                           \
            type g_mean, projection, zero = 0.0;                                           \
            for (j = 0; j < n; j++) {                                                      \
                xhat[j] = in[j] - m;                                                       \
                xhat[j] = xhat[j] * s;                                                     \
                scaled[j] = weight != NULL ? gr[j] * weight[j] : gr[j];                    \
                product[j] = scaled[j] * xhat[j];                                          \
            }                                                                              \
            if (grad_x != NULL) {                                                          \
                type *to = grad_x + r * n;                                                 \
                g_mean = (type)((double)(zero + pairwise(scaled, n)) / (double)n);         \
                projection = (type)((double)(zero + pairwise(product, n)) / (double)n);    \
                for (j = 0; j < n; j++) {                                                  \
                    type d = xhat[j] * projection;                                         \
                    d = scaled[j] - d;                                                     \
                    d = d - g_mean;                                                        \
                    to[j] = d * s;                                                         \
                }                                                                          \
            }                                                                              \
            if (grad_w != NULL)                                                            \
                for (j = 0; j < n; j++) grad_w[j] = grad_w[j] + gr[j] * xhat[j];           \
            if (grad_b != NULL)                                                            \
                for (j = 0; j < n; j++) grad_b[j] = grad_b[j] + gr[j];                     \
        }                                                                                  \
    }

/* Batch norm's training backward on arrays (_batch_norm_backward_arrays with the forward's
   statistics), x and g (N, C, P) C-contiguous: numpy reduces over (0, 2, 3...) by adding each
   (n, c) plane's pairwise sum to the channel's total in n order from 0, and divides by the
   count in float64. Per channel: the plane sums of the scaled gradient, of its product with
   the normalized plane, of g times the normalized plane and of g; then the input's gradient
   ((scaled - xhat * projection) - mean) * rstd. grad_* may be NULL; scratch: 4 P entries. */
#define GRADVIZ_BATCH_NORM_BACKWARD(name, type, pairwise)                                  \
    static inline void name(const type *x, const type *g, Py_ssize_t batch,                \
                            Py_ssize_t channels, Py_ssize_t plane, const type *weight,     \
                            const type *mean, const type *rstd, type *grad_x,              \
                            type *grad_w, type *grad_b, type *scratch) {                   \
        type *xhat = scratch, *scaled = scratch + plane, *product = scratch + 2 * plane;   \
        type *affine = scratch + 3 * plane;                                                \
        const double count = (double)batch * (double)plane;                                \
        Py_ssize_t c, n, j;                                                                \
        for (c = 0; c < channels; c++) {                                                   \
            const type m = mean[c], s = rstd[c], w = weight != NULL ? weight[c] : 0;      \
            type g_total = 0.0, p_total = 0.0, w_total = 0.0, b_total = 0.0;               \
            type g_mean, projection;                                                       \
            for (n = 0; n < batch; n++) {                                                  \
                const type *in = x + (n * channels + c) * plane;                           \
                const type *gr = g + (n * channels + c) * plane;                           \
                for (j = 0; j < plane; j++) {                                              \
                    xhat[j] = in[j] - m;                                                   \
                    xhat[j] = xhat[j] * s;                                                 \
                    scaled[j] = weight != NULL ? gr[j] * w : gr[j];                        \
                    product[j] = scaled[j] * xhat[j];                                      \
                    affine[j] = gr[j] * xhat[j];                                           \
                }                                                                          \
                g_total = g_total + pairwise(scaled, plane);                               \
                p_total = p_total + pairwise(product, plane);                              \
                w_total = w_total + pairwise(affine, plane);                               \
                b_total = b_total + pairwise(gr, plane);                                   \
            }                                                                              \
            if (grad_w != NULL) grad_w[c] = w_total;                                       \
            if (grad_b != NULL) grad_b[c] = b_total;                                       \
            if (grad_x == NULL) continue;                                                  \
            g_mean = (type)((double)g_total / count);                                      \
            projection = (type)((double)p_total / count);                                  \
            for (n = 0; n < batch; n++) {                                                  \
                const type *in = x + (n * channels + c) * plane;                           \
                const type *gr = g + (n * channels + c) * plane;                           \
                type *to = grad_x + (n * channels + c) * plane;                            \
                for (j = 0; j < plane; j++) {                                              \
                    type h = in[j] - m, d;                                                 \
                    h = h * s;                                                             \
                    d = h * projection;                                                    \
                    d = (weight != NULL ? gr[j] * w : gr[j]) - d;                          \
                    d = d - g_mean;                                                        \
                    to[j] = d * s;                                                         \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
    }

GRADVIZ_DTYPE_PAIRWISE(gradviz_pairwise_float, float, )
GRADVIZ_DTYPE_PAIRWISE(gradviz_pairwise_double, double, )
GRADVIZ_DTYPE_PAIRWISE(gradviz_pairwise_float_clones, float, GRADVIZ_VECTOR_CLONES)
GRADVIZ_DTYPE_PAIRWISE(gradviz_pairwise_double_clones, double, GRADVIZ_VECTOR_CLONES)
GRADVIZ_LAYER_NORM(gradviz_layer_norm_f32, float, gradviz_pairwise_float_clones, sqrtf)
GRADVIZ_LAYER_NORM(gradviz_layer_norm_f64, double, gradviz_pairwise_double_clones, sqrt)
GRADVIZ_LAYER_NORM_BACKWARD(gradviz_layer_norm_backward_f32, float, gradviz_pairwise_float)
GRADVIZ_LAYER_NORM_BACKWARD(gradviz_layer_norm_backward_f64, double, gradviz_pairwise_double)
GRADVIZ_BATCH_NORM_BACKWARD(gradviz_batch_norm_backward_f32, float, gradviz_pairwise_float)
GRADVIZ_BATCH_NORM_BACKWARD(gradviz_batch_norm_backward_f64, double, gradviz_pairwise_double)

GRADVIZ_EXACT_END

#endif  /* GRADVIZ_LAYER_NORM_H */
