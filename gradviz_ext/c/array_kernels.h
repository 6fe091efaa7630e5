/* Fused whole-array kernels (Note [Whole-array kernels]).
 *
 * Included by gradviz_ext/_ops.pxd (Cython copies the include into every
 * module that cimports it); static functions only, after Python.h.
 */
#ifndef GRADVIZ_ARRAY_KERNELS_H
#define GRADVIZ_ARRAY_KERNELS_H

/* Note [Whole-array kernels] (gradviz_ext/_ops.py): add/sub with an alpha as one fused
 * multiply-add per element (PyTorch's rounding), in place or into a new array, lerp and
 * addcmul the same way, relu's backward as one pass, and a matrix's transpose plus a row vector in
 * tiles; for aligned C-contiguous float32/float64 arrays of any size. */
#include <stdint.h>
#include <string.h>
#include "small_kernels.h"  /* gradviz_small_array, gradviz_flat_size */

/* two covered arrays of one dtype and one shape: their size, else -1 */
static inline Py_ssize_t gradviz_flat_pair(PyObject *a, PyObject *b, int writeable) {
    gradviz_small_array *x = (gradviz_small_array *)a, *y = (gradviz_small_array *)b;
    Py_ssize_t n = gradviz_flat_size(a, writeable);
    int i;
    if (n < 0 || gradviz_flat_size(b, 0) < 0) return -1;
    if (x->descr != y->descr || x->nd != y->nd) return -1;
    for (i = 0; i < x->nd; i++)
        if (x->dimensions[i] != y->dimensions[i]) return -1;
    return n;
}

static inline PyObject *gradviz_new_like(PyObject *like) {
    gradviz_small_array *a = (gradviz_small_array *)like;
    Py_INCREF(a->descr);  /* PyArray_NewFromDescr steals it */
    return gradviz_new_from_descr((PyTypeObject *)gradviz_small_ndarray, a->descr, a->nd,
                                  a->dimensions, NULL, NULL, 0, NULL);
}

/* The fused multiply-add loops, compiled for the FMA instruction set and used only when
   the CPU has it (checked once, gradviz_fma_enable): PyTorch's vectorized add with an
   alpha is fmadd on such CPUs, rounding once. */
static int gradviz_fma_ok = 0;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
__attribute__((target("avx2,fma")))
static inline void gradviz_fma_f32(float *o, const float *a, const float *b, float s,
                            Py_ssize_t n) {
    Py_ssize_t k;
    for (k = 0; k < n; k++) o[k] = __builtin_fmaf(s, b[k], a[k]);
}
__attribute__((target("avx2,fma")))
static inline void gradviz_fma_f64(double *o, const double *a, const double *b, double s,
                            Py_ssize_t n) {
    Py_ssize_t k;
    for (k = 0; k < n; k++) o[k] = __builtin_fma(s, b[k], a[k]);
}
static inline void gradviz_fma_enable(void) {
    __builtin_cpu_init();
    gradviz_fma_ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
static inline void gradviz_fma_f32(float *o, const float *a, const float *b, float s,
                            Py_ssize_t n) {}
static inline void gradviz_fma_f64(double *o, const double *a, const double *b, double s,
                            Py_ssize_t n) {}
static inline void gradviz_fma_enable(void) { gradviz_fma_ok = 0; }
#endif

/* a + alpha * b, one rounding per element; into a when in_place (a is returned, a new
   reference), else into a new array. None (a new reference) when not covered: other
   dtypes or layouts, broadcasting, an alpha that is not a Python float or int exact in
   the dtype, arrays that overlap, or a CPU without FMA. */
static inline PyObject *gradviz_fused_add(PyObject *a, PyObject *b, PyObject *alpha, int in_place) {
    gradviz_small_array *x = (gradviz_small_array *)a, *y = (gradviz_small_array *)b;
    Py_ssize_t n, itemsize;
    double s;
    PyObject *out;
    char *o;
    int f32;
    if (gradviz_new_from_descr == NULL || !gradviz_fma_ok) Py_RETURN_NONE;
    n = gradviz_flat_pair(a, b, in_place);
    if (n < 0) Py_RETURN_NONE;
    f32 = x->descr == gradviz_small_f32;
    if (!gradviz_small_number(alpha, f32, &s)) Py_RETURN_NONE;
    itemsize = f32 ? 4 : 8;
    if (in_place && x->data != y->data && x->data < y->data + n * itemsize
            && y->data < x->data + n * itemsize)
        Py_RETURN_NONE;  /* partly overlapping: numpy's ufunc buffers it */
    if (in_place) {
        Py_INCREF(a);
        out = a;
    } else {
        out = gradviz_new_like(a);
        if (out == NULL) return NULL;
    }
    o = ((gradviz_small_array *)out)->data;
    if (f32)
        gradviz_fma_f32((float *)o, (const float *)x->data, (const float *)y->data,
                        (float)s, n);
    else
        gradviz_fma_f64((double *)o, (const double *)x->data, (const double *)y->data, s, n);
    return out;
}

/* PyTorch's lerp (ATen's lerp_vec), from the nearer end: start + w * (end - start) where
   |w| < 0.5, else end + (w - 1) * (end - start) (NaN for a NaN w), one fused multiply-add
   per element as its vectorized kernel on CPUs with FMA. A scalar weight has stride 0. */
#define GRADVIZ_LERP_LOOP(T, FMA, ABS, o, s, e, w, ws, n)                          \
    do {                                                                      \
        Py_ssize_t k;                                                         \
        for (k = 0; k < (n); k++) {                                           \
            T wk = (w)[k * (ws)], d = (e)[k] - (s)[k];                         \
            int small = ABS(wk) < (T)0.5;                                      \
            (o)[k] = FMA(small ? wk : wk - (T)1, d, small ? (s)[k] : (e)[k]);  \
        }                                                                     \
    } while (0)
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
__attribute__((target("avx2,fma")))
static inline void gradviz_lerp_f32(float *o, const float *s, const float *e, const float *w,
                                    Py_ssize_t ws, Py_ssize_t n) {
    GRADVIZ_LERP_LOOP(float, __builtin_fmaf, __builtin_fabsf, o, s, e, w, ws, n);
}
__attribute__((target("avx2,fma")))
static inline void gradviz_lerp_f64(double *o, const double *s, const double *e,
                                    const double *w, Py_ssize_t ws, Py_ssize_t n) {
    GRADVIZ_LERP_LOOP(double, __builtin_fma, __builtin_fabs, o, s, e, w, ws, n);
}
#else
static inline void gradviz_lerp_f32(float *o, const float *s, const float *e, const float *w,
                                    Py_ssize_t ws, Py_ssize_t n) {}
static inline void gradviz_lerp_f64(double *o, const double *s, const double *e,
                                    const double *w, Py_ssize_t ws, Py_ssize_t n) {}
#endif

/* lerp(start, end, weight) into a new array: weight an array of start's dtype and shape, or
   a Python float or int (converted to the dtype, as PyTorch's scalar weight). None (a new
   reference) when not covered: other dtypes or layouts, broadcasting, or a CPU without FMA. */
static inline PyObject *gradviz_lerp(PyObject *start, PyObject *end, PyObject *weight) {
    gradviz_small_array *s = (gradviz_small_array *)start, *e = (gradviz_small_array *)end;
    Py_ssize_t n, ws = 1;
    double scalar;
    float scalar32;
    const char *w;
    PyObject *out;
    int f32;
    if (gradviz_new_from_descr == NULL || !gradviz_fma_ok) Py_RETURN_NONE;
    n = gradviz_flat_pair(start, end, 0);
    if (n < 0) Py_RETURN_NONE;
    f32 = s->descr == gradviz_small_f32;
    if (gradviz_small_number(weight, 0, &scalar)) {
        scalar32 = (float)scalar;
        w = f32 ? (const char *)&scalar32 : (const char *)&scalar;
        ws = 0;
    } else if (gradviz_flat_pair(start, weight, 0) == n) {
        w = ((gradviz_small_array *)weight)->data;
    } else {
        Py_RETURN_NONE;
    }
    out = gradviz_new_like(start);
    if (out == NULL) return NULL;
    if (f32)
        gradviz_lerp_f32((float *)((gradviz_small_array *)out)->data, (const float *)s->data,
                         (const float *)e->data, (const float *)w, ws, n);
    else
        gradviz_lerp_f64((double *)((gradviz_small_array *)out)->data, (const double *)s->data,
                         (const double *)e->data, (const double *)w, ws, n);
    return out;
}

/* x * y + z rounded once per element (one fused multiply-add), for arrays of one dtype and
   shape: PyTorch's addcmul, whose vectorized loop fuses its last multiply and its add. None
   (a new reference) when not covered: other dtypes or layouts, or a CPU without FMA. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
__attribute__((target("avx2,fma")))
static inline void gradviz_fma3_f32(float *o, const float *x, const float *y, const float *z,
                                    Py_ssize_t n) {
    Py_ssize_t k;
    for (k = 0; k < n; k++) o[k] = __builtin_fmaf(x[k], y[k], z[k]);
}
__attribute__((target("avx2,fma")))
static inline void gradviz_fma3_f64(double *o, const double *x, const double *y,
                                    const double *z, Py_ssize_t n) {
    Py_ssize_t k;
    for (k = 0; k < n; k++) o[k] = __builtin_fma(x[k], y[k], z[k]);
}
#else
static inline void gradviz_fma3_f32(float *o, const float *x, const float *y, const float *z,
                                    Py_ssize_t n) {}
static inline void gradviz_fma3_f64(double *o, const double *x, const double *y,
                                    const double *z, Py_ssize_t n) {}
#endif

static inline PyObject *gradviz_fma3(PyObject *x, PyObject *y, PyObject *z) {
    gradviz_small_array *a = (gradviz_small_array *)x;
    Py_ssize_t n;
    PyObject *out;
    if (gradviz_new_from_descr == NULL || !gradviz_fma_ok) Py_RETURN_NONE;
    n = gradviz_flat_pair(x, y, 0);
    if (n < 0 || gradviz_flat_pair(x, z, 0) != n) Py_RETURN_NONE;
    out = gradviz_new_like(x);
    if (out == NULL) return NULL;
    if (a->descr == gradviz_small_f32)
        gradviz_fma3_f32((float *)((gradviz_small_array *)out)->data, (const float *)a->data,
                         (const float *)((gradviz_small_array *)y)->data,
                         (const float *)((gradviz_small_array *)z)->data, n);
    else
        gradviz_fma3_f64((double *)((gradviz_small_array *)out)->data, (const double *)a->data,
                         (const double *)((gradviz_small_array *)y)->data,
                         (const double *)((gradviz_small_array *)z)->data, n);
    return out;
}

/* g's bits where result > 0 or is NaN, else the bits of +0.0: an AND with a mask, so the
   loop has no branch to mispredict on a random sign pattern, and vectorizes */
#define GRADVIZ_THRESHOLD_LOOP(T, U, g, r, o, n)                                   \
    do {                                                                      \
        const char *gs = (const char *)(g); const T *rs = (const T *)(r);      \
        char *os = (char *)(o); Py_ssize_t k; U bits;                          \
        for (k = 0; k < (n); k++) {                                           \
            memcpy(&bits, gs + k * sizeof(U), sizeof(U));                      \
            bits &= (U)0 - (U)!(rs[k] <= 0);                                    \
            memcpy(os + k * sizeof(U), &bits, sizeof(U));                      \
        }                                                                     \
    } while (0)

/* relu's backward, PyTorch's threshold_backward(g, result, 0): 0 where result <= 0, else
   g (a NaN result passes g on). A new array, or None (a new reference) when not covered. */
static inline PyObject *gradviz_threshold_backward(PyObject *g, PyObject *result) {
    Py_ssize_t n;
    PyObject *out;
    char *o;
    if (gradviz_new_from_descr == NULL) Py_RETURN_NONE;
    n = gradviz_flat_pair(g, result, 0);
    if (n < 0) Py_RETURN_NONE;
    out = gradviz_new_like(g);
    if (out == NULL) return NULL;
    o = ((gradviz_small_array *)out)->data;
    if (((gradviz_small_array *)g)->descr == gradviz_small_f32)
        GRADVIZ_THRESHOLD_LOOP(float, uint32_t, ((gradviz_small_array *)g)->data,
                               ((gradviz_small_array *)result)->data, o, n);
    else
        GRADVIZ_THRESHOLD_LOOP(double, uint64_t, ((gradviz_small_array *)g)->data,
                               ((gradviz_small_array *)result)->data, o, n);
    return out;
}

/* out[i][j] = t[j][i] (+ bias[j]) in square tiles, so both the rows read and the rows
   written stay in cache: numpy's strided copy of a transposed view reads a new cache line
   per element. One IEEE add in the dtype, as numpy's. */
#define GRADVIZ_TRANSPOSE_LOOP(T, t, bias, o, rows, cols)                          \
    do {                                                                      \
        const T *ts = (const T *)(t); const T *bs = (const T *)(bias);         \
        T *os = (T *)(o); Py_ssize_t i0, j0, i, j, i1, j1;                      \
        for (j0 = 0; j0 < (cols); j0 += 32) {                                  \
            j1 = j0 + 32 < (cols) ? j0 + 32 : (cols);                          \
            for (i0 = 0; i0 < (rows); i0 += 32) {                              \
                i1 = i0 + 32 < (rows) ? i0 + 32 : (rows);                      \
                for (i = i0; i < i1; i++) {                                   \
                    T *orow = os + i * (cols);                                 \
                    if (bs != NULL)                                           \
                        for (j = j0; j < j1; j++)                             \
                            orow[j] = ts[j * (rows) + i] + bs[j];              \
                    else                                                      \
                        for (j = j0; j < j1; j++)                             \
                            orow[j] = ts[j * (rows) + i];                      \
                }                                                             \
            }                                                                 \
        }                                                                     \
    } while (0)

/* t.T (+ bias) as a new C-contiguous array: t a C-contiguous 2-D float32/float64 array,
   bias None or a C-contiguous 1-D array of t's dtype and t.shape[0] entries. None (a new
   reference) when not covered. */
static inline PyObject *gradviz_transpose_add(PyObject *t, PyObject *bias) {
    gradviz_small_array *x = (gradviz_small_array *)t, *b = (gradviz_small_array *)bias;
    gradviz_small_array *o;
    Py_ssize_t dims[2];
    PyObject *out;
    const char *bias_data = NULL;
    if (gradviz_new_from_descr == NULL || x->nd != 2 || gradviz_flat_size(t, 0) < 0)
        Py_RETURN_NONE;
    if (bias != Py_None) {
        if (gradviz_flat_size(bias, 0) < 0 || b->nd != 1 || b->descr != x->descr
                || b->dimensions[0] != x->dimensions[0])
            Py_RETURN_NONE;
        bias_data = b->data;
    }
    dims[0] = x->dimensions[1];
    dims[1] = x->dimensions[0];
    Py_INCREF(x->descr);  /* PyArray_NewFromDescr steals it */
    out = gradviz_new_from_descr((PyTypeObject *)gradviz_small_ndarray, x->descr, 2, dims,
                                 NULL, NULL, 0, NULL);
    if (out == NULL) return NULL;
    o = (gradviz_small_array *)out;
    if (x->descr == gradviz_small_f32)
        GRADVIZ_TRANSPOSE_LOOP(float, x->data, bias_data, o->data, dims[0], dims[1]);
    else
        GRADVIZ_TRANSPOSE_LOOP(double, x->data, bias_data, o->data, dims[0], dims[1]);
    return out;
}

/* out += bias in place, out a writeable C-contiguous 2-D float32/float64 array, bias a
   C-contiguous 1-D array of its dtype and out.shape[1] entries holding no NaN (with a NaN
   in both operands numpy's vectorized add may keep either NaN; with at most one, every
   order of the operands gives numpy's bits). 1 when added, 0 (nothing written) when not
   covered. */
static inline int gradviz_add_row_vector(PyObject *out, PyObject *bias) {
    gradviz_small_array *x = (gradviz_small_array *)out, *b = (gradviz_small_array *)bias;
    Py_ssize_t rows, columns, i, j;
    if (gradviz_flat_size(out, 1) < 0 || x->nd != 2 || gradviz_flat_size(bias, 0) < 0
            || b->nd != 1 || b->descr != x->descr || b->dimensions[0] != x->dimensions[1])
        return 0;
    rows = x->dimensions[0];
    columns = x->dimensions[1];
    if (x->descr == gradviz_small_f32) {
        float *o = (float *)x->data;
        const float *v = (const float *)b->data;
        for (j = 0; j < columns; j++)
            if (v[j] != v[j]) return 0;
        for (i = 0; i < rows; i++, o += columns)
            for (j = 0; j < columns; j++) o[j] = o[j] + v[j];
    } else {
        double *o = (double *)x->data;
        const double *v = (const double *)b->data;
        for (j = 0; j < columns; j++)
            if (v[j] != v[j]) return 0;
        for (i = 0; i < rows; i++, o += columns)
            for (j = 0; j < columns; j++) o[j] = o[j] + v[j];
    }
    return 1;
}

#endif  /* GRADVIZ_ARRAY_KERNELS_H */
