/* One Adam update of a parameter, its two moments and its gradient in one pass.
 *
 * Note [Optimizer steps on arrays] in gradviz/optim/_optimizer.py says why: on arrays, Adam's
 * step is still eleven numpy calls per parameter, each a pass over the arrays, and on a small
 * model the calls cost more than the arithmetic. This loop does, per element, the numpy
 * operations of that step in their order, each rounded as numpy rounds it: every scalar is
 * rounded to the array's dtype first (numpy's rule for a Python float with a float32 array),
 * `m += (g - m) * (1 - beta1)`, `v = v * beta2`, then `v + (1 - beta2) * (g * g)` and the
 * parameter's `p + (-step_size) * (m / ((sqrt(v) / bias_correction2_sqrt) + eps))` as one
 * fused multiply-add each, as gradviz's add with an alpha computes them where the CPU has FMA
 * (Note [Whole-array kernels]); every other product and sum is rounded on its own
 * (exact_arithmetic.h). So the results are the numpy calls' bits. It covers what those calls
 * cover with the fused add: aligned C-contiguous float32/float64 arrays of one dtype and shape
 * that do not overlap, on a CPU with FMA; AMSGrad's running maximum stays with numpy.
 *
 * Included by gradviz_ext/_ops.pxd (Cython copies the include into every module that
 * cimports it); static functions only, after Python.h and array_kernels.h.
 */
#ifndef GRADVIZ_ADAM_STEP_H
#define GRADVIZ_ADAM_STEP_H

#include <math.h>
#include "array_kernels.h"  /* gradviz_flat_pair, gradviz_fma_ok */
#include "exact_arithmetic.h"

/* the step's scalars, each as a Python float (rounded to the arrays' dtype by the loop) */
typedef struct {
    double keep_gradient;   /* 1 - beta1 */
    double beta2;
    double keep_square;     /* 1 - beta2 */
    double correction2;     /* sqrt(1 - beta2 ** step) */
    double eps;
    double rate;            /* -lr / (1 - beta1 ** step) */
} gradviz_adam_scalars;

GRADVIZ_EXACT_BEGIN

#define GRADVIZ_ADAM_LOOP(T, FMA, SQRT, p, g, m, v, n, s)                             \
    do {                                                                          \
        const T c1 = (T)(s)->keep_gradient, b2 = (T)(s)->beta2;                   \
        const T c2 = (T)(s)->keep_square, bc2 = (T)(s)->correction2;              \
        const T e = (T)(s)->eps, rate = (T)(s)->rate;                             \
        Py_ssize_t k;                                                             \
        for (k = 0; k < (n); k++) {                                               \
            T gk = (g)[k], mk = (m)[k], d, vk, q;                                 \
            d = gk - mk;                                                          \
            d = d * c1;                                                           \
            mk = mk + d;                                                          \
            (m)[k] = mk;                                                          \
            vk = (v)[k] * b2;                                                     \
            vk = FMA(c2, gk * gk, vk);                                            \
            (v)[k] = vk;                                                          \
            q = SQRT(vk);                                                         \
            q = q / bc2;                                                          \
            q = q + e;                                                            \
            q = mk / q;                                                           \
            (p)[k] = FMA(rate, q, (p)[k]);                                        \
        }                                                                         \
    } while (0)

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
__attribute__((target("avx2,fma")))
static inline void gradviz_adam_f32(float *p, const float *g, float *m, float *v, Py_ssize_t n,
                                    const gradviz_adam_scalars *s) {
    GRADVIZ_ADAM_LOOP(float, __builtin_fmaf, __builtin_sqrtf, p, g, m, v, n, s);
}
__attribute__((target("avx2,fma")))
static inline void gradviz_adam_f64(double *p, const double *g, double *m, double *v,
                                    Py_ssize_t n, const gradviz_adam_scalars *s) {
    GRADVIZ_ADAM_LOOP(double, __builtin_fma, __builtin_sqrt, p, g, m, v, n, s);
}
#else
static inline void gradviz_adam_f32(float *p, const float *g, float *m, float *v, Py_ssize_t n,
                                    const gradviz_adam_scalars *s) {}
static inline void gradviz_adam_f64(double *p, const double *g, double *m, double *v,
                                    Py_ssize_t n, const gradviz_adam_scalars *s) {}
#endif

GRADVIZ_EXACT_END

/* whether the byte ranges of two arrays of n items of `size` bytes meet */
static inline int gradviz_adam_meet(PyObject *a, PyObject *b, Py_ssize_t bytes) {
    char *x = ((gradviz_small_array *)a)->data, *y = ((gradviz_small_array *)b)->data;
    return x < y + bytes && y < x + bytes;
}

/* The update in place of p, m and v from g: 1 when done, 0 when not covered (other dtypes or
   layouts, arrays that overlap or are not writeable, a scalar that overflows float32, a CPU
   without FMA): the caller then makes the numpy calls. */
static inline int gradviz_adam_step(PyObject *p, PyObject *g, PyObject *m, PyObject *v,
                                    const gradviz_adam_scalars *s) {
    Py_ssize_t n, bytes;
    int f32;
    if (gradviz_new_from_descr == NULL || !gradviz_fma_ok) return 0;
    n = gradviz_flat_pair(p, g, 1);  /* the first of a pair is the one checked writeable */
    if (n < 0 || gradviz_flat_pair(m, p, 1) != n || gradviz_flat_pair(v, p, 1) != n) return 0;
    f32 = ((gradviz_small_array *)p)->descr == gradviz_small_f32;
    if (f32) {
        const double *scalars = &s->keep_gradient;
        int i;
        for (i = 0; i < 6; i++)  /* numpy refuses what overflows float32: not covered */
            if (isfinite(scalars[i]) && !isfinite((float)scalars[i])) return 0;
    }
    bytes = n * (f32 ? 4 : 8);
    if (gradviz_adam_meet(p, g, bytes) || gradviz_adam_meet(p, m, bytes)
            || gradviz_adam_meet(p, v, bytes) || gradviz_adam_meet(g, m, bytes)
            || gradviz_adam_meet(g, v, bytes) || gradviz_adam_meet(m, v, bytes))
        return 0;
    if (f32)
        gradviz_adam_f32((float *)((gradviz_small_array *)p)->data,
                         (const float *)((gradviz_small_array *)g)->data,
                         (float *)((gradviz_small_array *)m)->data,
                         (float *)((gradviz_small_array *)v)->data, n, s);
    else
        gradviz_adam_f64((double *)((gradviz_small_array *)p)->data,
                         (const double *)((gradviz_small_array *)g)->data,
                         (double *)((gradviz_small_array *)m)->data,
                         (double *)((gradviz_small_array *)v)->data, n, s);
    return 1;
}

#endif  /* GRADVIZ_ADAM_STEP_H */
