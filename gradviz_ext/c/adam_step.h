/* One Adam (or AdamW) update of a parameter, its moments and its gradient in one pass.
 *
 * Note [Optimizer steps on arrays] in gradviz/optim/_optimizer.py says why: on arrays, Adam's
 * step is eleven numpy calls per parameter (more with maximize, weight decay or AMSGrad), each
 * a pass over the arrays, and on a small model the calls cost more than the arithmetic. This
 * loop does, per element, the operations of that step in their order, each rounded as numpy
 * rounds it: every scalar is rounded to the array's dtype first (numpy's rule for a Python float
 * with a float32 array); `g = -g` with maximize; AdamW's decoupled decay `p = p * shrink`, or
 * the L2 decay `g = g + decay * p` as one fused multiply-add; `m += (g - m) * (1 - beta1)`,
 * `v = v * beta2`, then `v + (1 - beta2) * (g * g)` as one fused multiply-add; with AMSGrad
 * the running maximum `largest = maximum(largest, v)` (numpy's: a NaN in the first operand
 * wins, then one in the second, a tie gives the second); and the parameter's
 * `p + rate * (m / ((sqrt(second) / correction2) + eps))` as one fused multiply-add. The fused
 * adds are gradviz's add with an alpha where the CPU has FMA (Note [Whole-array kernels]);
 * every other product and sum is rounded on its own (exact_arithmetic.h). So the results are
 * the numpy calls' bits. sqrt and division are correctly rounded in every width, so the loop
 * runs on AVX vectors of 8 float32 or 4 float64 values without changing a bit. It covers what those calls cover with the fused add: aligned C-contiguous float32/float64
 * arrays of one dtype and shape that do not overlap, on a CPU with FMA.
 *
 * Included by gradviz_ext/_ops.pxd (Cython copies the include into every module that
 * cimports it); static functions only, after Python.h and array_kernels.h.
 */
#ifndef GRADVIZ_ADAM_STEP_H
#define GRADVIZ_ADAM_STEP_H

#include <errno.h>
#include <math.h>
#include "array_kernels.h"  /* gradviz_flat_pair, gradviz_fma_ok */
#include "exact_arithmetic.h"

/* the step's scalars, each as a Python float (rounded to the arrays' dtype by the loop), and
   which of the optional operations run */
typedef struct {
    double keep_gradient;   /* 1 - beta1 */
    double beta2;
    double keep_square;     /* 1 - beta2 */
    double correction2;     /* sqrt(1 - beta2 ** step) */
    double eps;
    double rate;            /* -lr / (1 - beta1 ** step) */
    double decay;           /* L2 weight decay (when l2) */
    double shrink;          /* 1 - lr * weight_decay (when decoupled) */
    int negate;             /* maximize: the gradient's sign flipped first */
    int l2;                 /* g + decay * p */
    int decoupled;          /* p * shrink */
} gradviz_adam_scalars;

GRADVIZ_EXACT_BEGIN

/* numpy's maximum(a, b) */
#define GRADVIZ_ADAM_MAX(a, b) ((a) != (a) || (a) > (b) ? (a) : (b))

/* elements k0 to n - 1, one at a time */
#define GRADVIZ_ADAM_LOOP(T, FMA, SQRT, AMSGRAD, p, g, m, v, largest, k0, n, s)         \
    do {                                                                          \
        const T c1 = (T)(s)->keep_gradient, b2 = (T)(s)->beta2;                   \
        const T c2 = (T)(s)->keep_square, bc2 = (T)(s)->correction2;              \
        const T e = (T)(s)->eps, rate = (T)(s)->rate;                             \
        const T decay = (T)(s)->decay, shrink = (T)(s)->shrink;                   \
        Py_ssize_t k;                                                             \
        for (k = (k0); k < (n); k++) {                                            \
            T gk = (g)[k], pk = (p)[k], mk = (m)[k], d, vk, q;                    \
            if ((s)->negate) gk = -gk;                                            \
            if ((s)->decoupled) pk = pk * shrink;                                 \
            if ((s)->l2) gk = FMA(decay, pk, gk);                                 \
            d = gk - mk;                                                          \
            d = d * c1;                                                           \
            mk = mk + d;                                                          \
            (m)[k] = mk;                                                          \
            vk = (v)[k] * b2;                                                     \
            vk = FMA(c2, gk * gk, vk);                                            \
            (v)[k] = vk;                                                          \
            if (AMSGRAD) {                                                        \
                vk = GRADVIZ_ADAM_MAX((largest)[k], vk);                          \
                (largest)[k] = vk;                                                \
            }                                                                     \
            q = SQRT(vk);                                                         \
            q = q / bc2;                                                          \
            q = q + e;                                                            \
            q = mk / q;                                                           \
            (p)[k] = FMA(rate, q, pk);                                            \
        }                                                                         \
    } while (0)

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

/* The same operations on a vector of LANES elements at a time (V the vector type, X the
   intrinsics' suffix, ps or pd), written with AVX intrinsics: GCC does not vectorize the loop
   above by itself, as its sqrt must be able to set errno. The elements past the last whole
   vector go through the loop above. */
#define GRADVIZ_ADAM_VECTORS(T, V, X, LANES, AMSGRAD, p, g, m, v, largest, n, s, done)   \
    do {                                                                          \
        const V c1 = _mm256_set1_##X((T)(s)->keep_gradient);                     \
        const V b2 = _mm256_set1_##X((T)(s)->beta2);                              \
        const V c2 = _mm256_set1_##X((T)(s)->keep_square);                        \
        const V bc2 = _mm256_set1_##X((T)(s)->correction2);                       \
        const V e = _mm256_set1_##X((T)(s)->eps);                                 \
        const V rate = _mm256_set1_##X((T)(s)->rate);                             \
        const V decay = _mm256_set1_##X((T)(s)->decay);                           \
        const V shrink = _mm256_set1_##X((T)(s)->shrink);                         \
        const V sign = _mm256_set1_##X((T)-0.0);                                  \
        Py_ssize_t k;                                                             \
        for (k = 0; k + (LANES) <= (n); k += (LANES)) {                           \
            V gk = _mm256_loadu_##X((g) + k), pk = _mm256_loadu_##X((p) + k);     \
            V mk = _mm256_loadu_##X((m) + k), d, vk, q;                           \
            if ((s)->negate) gk = _mm256_xor_##X(gk, sign);                       \
            if ((s)->decoupled) pk = _mm256_mul_##X(pk, shrink);                  \
            if ((s)->l2) gk = _mm256_fmadd_##X(decay, pk, gk);                    \
            d = _mm256_sub_##X(gk, mk);                                           \
            d = _mm256_mul_##X(d, c1);                                            \
            mk = _mm256_add_##X(mk, d);                                           \
            _mm256_storeu_##X((m) + k, mk);                                       \
            vk = _mm256_mul_##X(_mm256_loadu_##X((v) + k), b2);                   \
            vk = _mm256_fmadd_##X(c2, _mm256_mul_##X(gk, gk), vk);               \
            _mm256_storeu_##X((v) + k, vk);                                       \
            if (AMSGRAD) {                                                        \
                V a = _mm256_loadu_##X((largest) + k);                            \
                V first = _mm256_or_##X(_mm256_cmp_##X(a, a, _CMP_UNORD_Q),       \
                                        _mm256_cmp_##X(a, vk, _CMP_GT_OQ));       \
                vk = _mm256_blendv_##X(vk, a, first);                             \
                _mm256_storeu_##X((largest) + k, vk);                             \
            }                                                                     \
            q = _mm256_sqrt_##X(vk);                                              \
            q = _mm256_div_##X(q, bc2);                                           \
            q = _mm256_add_##X(q, e);                                             \
            q = _mm256_div_##X(mk, q);                                            \
            _mm256_storeu_##X((p) + k, _mm256_fmadd_##X(rate, q, pk));            \
        }                                                                         \
        (done) = k;                                                               \
    } while (0)

#define GRADVIZ_ADAM_KERNEL(name, T, V, X, LANES, FMA, SQRT, AMSGRAD)                        \
    __attribute__((target("avx2,fma")))                                                    \
    static void name(T *p, const T *g, T *m, T *v, T *largest, Py_ssize_t n,                \
                     const gradviz_adam_scalars *s) {                                      \
        Py_ssize_t done;                                                                   \
        GRADVIZ_ADAM_VECTORS(T, V, X, LANES, AMSGRAD, p, g, m, v, largest, n, s, done);    \
        GRADVIZ_ADAM_LOOP(T, FMA, SQRT, AMSGRAD, p, g, m, v, largest, done, n, s);         \
    }
#else
#define GRADVIZ_ADAM_KERNEL(name, T, V, X, LANES, FMA, SQRT, AMSGRAD)                        \
    static void name(T *p, const T *g, T *m, T *v, T *largest, Py_ssize_t n,                \
                     const gradviz_adam_scalars *s) {}
#endif
GRADVIZ_ADAM_KERNEL(gradviz_adam_f32, float, __m256, ps, 8, __builtin_fmaf, __builtin_sqrtf, 0)
GRADVIZ_ADAM_KERNEL(gradviz_adam_f64, double, __m256d, pd, 4, __builtin_fma, __builtin_sqrt, 0)
GRADVIZ_ADAM_KERNEL(gradviz_amsgrad_f32, float, __m256, ps, 8, __builtin_fmaf, __builtin_sqrtf,
                    1)
GRADVIZ_ADAM_KERNEL(gradviz_amsgrad_f64, double, __m256d, pd, 4, __builtin_fma, __builtin_sqrt,
                    1)

GRADVIZ_EXACT_END

/* whether the byte ranges of two arrays of n items of `size` bytes meet */
static inline int gradviz_adam_meet(PyObject *a, PyObject *b, Py_ssize_t bytes) {
    char *x = ((gradviz_small_array *)a)->data, *y = ((gradviz_small_array *)b)->data;
    return x < y + bytes && y < x + bytes;
}

#define GRADVIZ_ADAM_DATA(T, x) ((T *)((gradviz_small_array *)(x))->data)

/* Whether gradviz_adam_run covers the update of p, m, v (and largest, AMSGrad's running
   maximum, unless None) from g with these scalars: not for other dtypes or layouts, arrays that
   overlap or are not writeable, a scalar that overflows float32, a CPU without FMA (the caller
   then makes the numpy calls). */
static inline int gradviz_adam_covers(PyObject *p, PyObject *g, PyObject *m, PyObject *v,
                                      PyObject *largest, const gradviz_adam_scalars *s) {
    PyObject *arrays[5];
    Py_ssize_t n, bytes;
    int f32, count, i, j;
    if (gradviz_new_from_descr == NULL || !gradviz_fma_ok) return 0;
    n = gradviz_flat_pair(p, g, 1);  /* the first of a pair is the one checked writeable */
    if (n < 0 || gradviz_flat_pair(m, p, 1) != n || gradviz_flat_pair(v, p, 1) != n) return 0;
    if (largest != Py_None && gradviz_flat_pair(largest, p, 1) != n) return 0;
    f32 = ((gradviz_small_array *)p)->descr == gradviz_small_f32;
    if (f32) {
        const double scalars[8] = {s->keep_gradient, s->beta2, s->keep_square, s->correction2,
                                   s->eps, s->rate, s->decay, s->shrink};
        for (i = 0; i < 8; i++)  /* numpy refuses what overflows float32: not covered */
            if (isfinite(scalars[i]) && !isfinite((float)scalars[i])) return 0;
    }
    bytes = n * (f32 ? 4 : 8);
    arrays[0] = p; arrays[1] = g; arrays[2] = m; arrays[3] = v; arrays[4] = largest;
    count = largest != Py_None ? 5 : 4;
    for (i = 0; i < count; i++)
        for (j = i + 1; j < count; j++)
            if (gradviz_adam_meet(arrays[i], arrays[j], bytes)) return 0;
    return 1;
}

/* The update, where gradviz_adam_covers said it is covered. */
static inline void gradviz_adam_run(PyObject *p, PyObject *g, PyObject *m, PyObject *v,
                                    PyObject *largest, const gradviz_adam_scalars *s) {
    Py_ssize_t n = gradviz_flat_size(p, 1);
    int f32 = ((gradviz_small_array *)p)->descr == gradviz_small_f32;
    if (largest == Py_None) {
        if (f32)
            gradviz_adam_f32(GRADVIZ_ADAM_DATA(float, p), GRADVIZ_ADAM_DATA(float, g),
                             GRADVIZ_ADAM_DATA(float, m), GRADVIZ_ADAM_DATA(float, v), NULL, n, s);
        else
            gradviz_adam_f64(GRADVIZ_ADAM_DATA(double, p), GRADVIZ_ADAM_DATA(double, g),
                             GRADVIZ_ADAM_DATA(double, m), GRADVIZ_ADAM_DATA(double, v), NULL, n,
                             s);
    } else if (f32) {
        gradviz_amsgrad_f32(GRADVIZ_ADAM_DATA(float, p), GRADVIZ_ADAM_DATA(float, g),
                            GRADVIZ_ADAM_DATA(float, m), GRADVIZ_ADAM_DATA(float, v),
                            GRADVIZ_ADAM_DATA(float, largest), n, s);
    } else {
        gradviz_amsgrad_f64(GRADVIZ_ADAM_DATA(double, p), GRADVIZ_ADAM_DATA(double, g),
                            GRADVIZ_ADAM_DATA(double, m), GRADVIZ_ADAM_DATA(double, v),
                            GRADVIZ_ADAM_DATA(double, largest), n, s);
    }
}

/* The update in place: 1 when done, 0 when not covered (gradviz_adam_covers). */
static inline int gradviz_adam_step(PyObject *p, PyObject *g, PyObject *m, PyObject *v,
                                    PyObject *largest, const gradviz_adam_scalars *s) {
    if (!gradviz_adam_covers(p, g, m, v, largest, s)) return 0;
    gradviz_adam_run(p, g, m, v, largest, s);
    return 1;
}

/* For the step of a parameter group in one call (Note [Adam's parameter group in one call]
   in gradviz/optim/_optimizer.py): a step counter, the state's writeable 0-d float32 or
   float64 array, holds *next = its value after numpy's np.add(counter, 1, out=counter), one
   addition rounded to its dtype (1 when covered, 0 for any other array); gradviz_adam_count
   writes it. */
static inline int gradviz_adam_next_count(PyObject *counter, double *next) {
    gradviz_small_array *a = (gradviz_small_array *)counter;
    if (a->nd != 0 || gradviz_flat_size(counter, 1) != 1) return 0;
    if (a->descr == gradviz_small_f32)
        *next = (double)(*(float *)a->data + 1.0f);
    else
        *next = *(double *)a->data + 1.0;
    return 1;
}

static inline void gradviz_adam_count(PyObject *counter, double next) {
    gradviz_small_array *a = (gradviz_small_array *)counter;
    if (a->descr == gradviz_small_f32)
        *(float *)a->data = (float)next;  /* exact: next is a float32 value */
    else
        *(double *)a->data = next;
}

/* x ** t as Python's float power gives it for 0 <= x < 1 and a finite t >= 1, where it is the
   C library's pow after special cases that do not change the value: 0 where Python would
   raise instead (pow reported an error other than an underflow to zero). */
static inline int gradviz_adam_power(double x, double t, double *out) {
    errno = 0;
    *out = pow(x, t);
    if (errno == ERANGE && *out == 0.0) errno = 0;
    return errno == 0;
}

/* The step's bias corrections, as _adam_on_arrays computes them in Python floats:
   correction2 = math.sqrt(1 - beta2 ** t) and rate = -(lr / (1 - beta1 ** t)); 0 (not
   covered) outside 0 <= beta < 1 and finite t >= 1, or where Python's power would raise. */
static inline int gradviz_adam_corrections(double beta1, double beta2, double lr, double t,
                                           gradviz_adam_scalars *s) {
    double power1, power2;
    if (!(0.0 <= beta1 && beta1 < 1.0 && 0.0 <= beta2 && beta2 < 1.0 && isfinite(t)
          && t >= 1.0))
        return 0;
    if (!gradviz_adam_power(beta2, t, &power2) || !gradviz_adam_power(beta1, t, &power1))
        return 0;
    s->correction2 = sqrt(1.0 - power2);
    s->rate = -(lr / (1.0 - power1));
    return 1;
}

#endif  /* GRADVIZ_ADAM_STEP_H */
