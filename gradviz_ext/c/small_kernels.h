/* Arithmetic on small float arrays in one C loop (Note [Small kernels]).
 *
 * Included by gradviz_ext/_ops.pxd (Cython copies the include into every
 * module that cimports it); static functions only, after Python.h.
 */
#ifndef GRADVIZ_SMALL_KERNELS_H
#define GRADVIZ_SMALL_KERNELS_H

#include <math.h>
#include "ndarray_head.h"

/* Note [Small kernels] (gradviz_ext/_ops.py): add, sub, mul, div and neg of small C-contiguous
 * float32/float64 arrays (or an array and one number of its dtype) computed by a C loop into
 * an array made by numpy's own PyArray_NewFromDescr, found in numpy's C-API table (slot 94, part
 * of numpy's ABI since 1.0) so that building needs no numpy headers. Arrays are read through
 * ndarray_head.h's gradviz_ndarray_head. */
typedef gradviz_ndarray_head gradviz_small_array;  /* numpy's array head: ndarray_head.h */

typedef PyObject *(*gradviz_new_from_descr_fn)(PyTypeObject *, PyObject *, int,
                                               const Py_ssize_t *, const Py_ssize_t *,
                                               void *, int, PyObject *);
static gradviz_new_from_descr_fn gradviz_new_from_descr = NULL;
static PyObject *gradviz_small_ndarray = NULL, *gradviz_small_f32 = NULL,
                *gradviz_small_f64 = NULL;

#define GRADVIZ_SMALL_MAX 4096            /* elements; above it numpy's SIMD loops win */
#define GRADVIZ_SMALL_LAYOUT 0x0101       /* NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED */
#define GRADVIZ_WRITEABLE 0x0400          /* NPY_ARRAY_WRITEABLE */

/* Enable the kernels: numpy's _ARRAY_API capsule, numpy.ndarray and the float32 and
   float64 dtypes. 0 on success, -1 with an exception set. */
static inline int gradviz_small_enable(PyObject *capsule, PyObject *ndarray, PyObject *f32,
                                PyObject *f64) {
    void **api = (void **)PyCapsule_GetPointer(capsule, NULL);
    if (api == NULL) return -1;
    Py_INCREF(ndarray); Py_INCREF(f32); Py_INCREF(f64);
    gradviz_small_ndarray = ndarray;
    gradviz_small_f32 = f32;
    gradviz_small_f64 = f64;
    gradviz_new_from_descr = (gradviz_new_from_descr_fn)api[94];
    return 0;
}

static inline void gradviz_small_disable(void) { gradviz_new_from_descr = NULL; }

/* elements of an aligned, C-contiguous exact ndarray of float32/float64 (writeable when
   asked), else -1 */
static inline Py_ssize_t gradviz_flat_size(PyObject *x, int writeable) {
    gradviz_small_array *a = (gradviz_small_array *)x;
    Py_ssize_t n = 1;
    int i;
    if ((PyObject *)Py_TYPE(x) != gradviz_small_ndarray) return -1;
    if (a->descr != gradviz_small_f32 && a->descr != gradviz_small_f64) return -1;
    if ((a->flags & GRADVIZ_SMALL_LAYOUT) != GRADVIZ_SMALL_LAYOUT) return -1;
    if (writeable && !(a->flags & GRADVIZ_WRITEABLE)) return -1;
    for (i = 0; i < a->nd; i++) n *= a->dimensions[i];
    return n;
}

/* elements of a small, aligned, C-contiguous exact ndarray of float32/float64, else -1 */
static inline Py_ssize_t gradviz_small_size(PyObject *x) {
    Py_ssize_t n = gradviz_flat_size(x, 0);
    return n > GRADVIZ_SMALL_MAX ? -1 : n;
}

/* elements (at least one) of a small, aligned exact ndarray of float32/float64 whose strides
   are all 0: one element broadcast to a shape, as the gradient of a sum or a mean is; else -1 */
static inline Py_ssize_t gradviz_small_splat(PyObject *x) {
    gradviz_small_array *a = (gradviz_small_array *)x;
    Py_ssize_t n = 1;
    int i;
    if ((PyObject *)Py_TYPE(x) != gradviz_small_ndarray) return -1;
    if (a->descr != gradviz_small_f32 && a->descr != gradviz_small_f64) return -1;
    if (!(a->flags & 0x0100) || a->nd == 0) return -1;  /* NPY_ARRAY_ALIGNED */
    for (i = 0; i < a->nd; i++) {
        if (a->strides[i] != 0) return -1;
        n *= a->dimensions[i];
    }
    return n >= 1 && n <= GRADVIZ_SMALL_MAX ? n : -1;
}

static inline int gradviz_same_shape(gradviz_small_array *x, gradviz_small_array *y) {
    int i;
    if (x->nd != y->nd) return 0;
    for (i = 0; i < x->nd; i++)
        if (x->dimensions[i] != y->dimensions[i]) return 0;
    return 1;
}

/* A Python float or int as the scalar operand of an array of dtype f32 (else f64), the
   way numpy converts it; 0 when numpy's conversion could differ (an int beyond 2**53, or
   a finite float that overflows float32, which numpy warns about). */
static inline int gradviz_small_number(PyObject *x, int f32, double *out) {
    double v;
    if (PyFloat_CheckExact(x)) {
        v = PyFloat_AS_DOUBLE(x);
    } else if (PyLong_CheckExact(x)) {
        int overflow = 0;
        long long i = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (overflow || (i == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
        if (i > 9007199254740992LL || i < -9007199254740992LL) return 0;
        v = (double)i;
    } else {
        return 0;
    }
    if (f32 && isfinite(v) && !isfinite((float)v)) return 0;
    *out = v;
    return 1;
}

#define GRADVIZ_SMALL_LOOPS(T, x, y, s, o, n, kernel, side)                          \
    do {                                                                          \
        const T *xs = (const T *)(x); const T *ys = (const T *)(y);                \
        T *os = (T *)(o); T sv = (T)(s); Py_ssize_t k;                             \
        switch ((kernel) * 3 + (side)) {                                          \
        case 3:  for (k = 0; k < (n); k++) os[k] = xs[k] + ys[k]; break;           \
        case 4:  for (k = 0; k < (n); k++) os[k] = xs[k] + sv; break;              \
        case 5:  for (k = 0; k < (n); k++) os[k] = sv + xs[k]; break;              \
        case 6:  for (k = 0; k < (n); k++) os[k] = xs[k] - ys[k]; break;           \
        case 7:  for (k = 0; k < (n); k++) os[k] = xs[k] - sv; break;              \
        case 8:  for (k = 0; k < (n); k++) os[k] = sv - xs[k]; break;              \
        case 9:  for (k = 0; k < (n); k++) os[k] = xs[k] * ys[k]; break;           \
        case 10: for (k = 0; k < (n); k++) os[k] = xs[k] * sv; break;              \
        case 11: for (k = 0; k < (n); k++) os[k] = sv * xs[k]; break;              \
        case 12: for (k = 0; k < (n); k++) os[k] = xs[k] / ys[k]; break;           \
        case 13: for (k = 0; k < (n); k++) os[k] = xs[k] / sv; break;              \
        case 14: for (k = 0; k < (n); k++) os[k] = sv / xs[k]; break;              \
        default: for (k = 0; k < (n); k++) os[k] = -xs[k]; break;                  \
        }                                                                         \
    } while (0)

/* kernel (1 add .. 4 div) of a and b where one of them, or both, is a splat (all strides 0,
   gradviz_small_splat), into a new C-contiguous array of the splat's shape, the layout numpy's
   ufunc gives. The other operand is a splat, a 0-d array or a number: then every element of
   the result is the same, computed once by the loops below and copied; or a C-contiguous
   array of the splat's shape: then the loops run over it with the splat's element as the
   number. Both arrays of one dtype. None when not covered. */
static inline PyObject *gradviz_small_splat_arith(int kernel, PyObject *a, PyObject *b,
                                                  Py_ssize_t splat_a, Py_ssize_t splat_b) {
    int first = splat_a >= 0;  /* the splat is a, else b */
    gradviz_small_array *splat = (gradviz_small_array *)(first ? a : b);
    PyObject *rest = first ? b : a;
    gradviz_small_array *other = (gradviz_small_array *)rest;
    Py_ssize_t n = first ? splat_a : splat_b, other_splat = first ? splat_b : splat_a, k;
    int f32 = splat->descr == gradviz_small_f32, varies = 0;
    double s;
    PyObject *out;
    char *o;
    if (other_splat >= 0 || gradviz_small_size(rest) >= 0) {
        if (other->descr != splat->descr) Py_RETURN_NONE;
        if (other->nd != 0) {
            if (!gradviz_same_shape(splat, other)) Py_RETURN_NONE;
            varies = other_splat < 0;  /* a C-contiguous array: its elements vary */
        }
        /* the number: the splat's element where the other array varies, else the other's */
        {
            const char *element = (varies ? splat : other)->data;
            s = f32 ? *(const float *)element : *(const double *)element;
        }
    } else if (!gradviz_small_number(rest, f32, &s)) {
        Py_RETURN_NONE;
    }
    Py_INCREF(splat->descr);  /* PyArray_NewFromDescr steals it */
    out = gradviz_new_from_descr((PyTypeObject *)gradviz_small_ndarray, splat->descr, splat->nd,
                                 splat->dimensions, NULL, NULL, 0, NULL);
    if (out == NULL) return NULL;
    o = ((gradviz_small_array *)out)->data;
    if (varies) {  /* the array (op) the splat's element, or that element (op) the array */
        if (f32) GRADVIZ_SMALL_LOOPS(float, other->data, NULL, s, o, n, kernel, first ? 2 : 1);
        else GRADVIZ_SMALL_LOOPS(double, other->data, NULL, s, o, n, kernel, first ? 2 : 1);
        return out;
    }
    if (f32) {  /* one element, in the operands' order, copied */
        float value;
        GRADVIZ_SMALL_LOOPS(float, splat->data, NULL, s, &value, 1, kernel, first ? 1 : 2);
        for (k = 0; k < n; k++) ((float *)o)[k] = value;
    } else {
        double value;
        GRADVIZ_SMALL_LOOPS(double, splat->data, NULL, s, &value, 1, kernel, first ? 1 : 2);
        for (k = 0; k < n; k++) ((double *)o)[k] = value;
    }
    return out;
}

/* kernel (1 add, 2 sub, 3 mul, 4 div, 5 neg: KERNEL_* in _ops.py) of a and b (b unused
   for neg). A new array, or None (a new reference) when the operands are not covered:
   then numpy's ufunc computes it. */
static inline PyObject *gradviz_small_arith(int kernel, PyObject *a, PyObject *b) {
    gradviz_small_array *big, *other = NULL;
    Py_ssize_t n, m;
    double s = 0.0;
    int side;  /* 0: two arrays of one shape, 1: array (op) number, 2: number (op) array */
    PyObject *out;
    if (gradviz_new_from_descr == NULL) Py_RETURN_NONE;
    n = gradviz_small_size(a);
    if (kernel == 5) {
        if (n < 0) Py_RETURN_NONE;
        big = (gradviz_small_array *)a;
        side = 1;
    } else {
        m = gradviz_small_size(b);
        if (n < 0 || m < 0) {
            Py_ssize_t splat_a = n < 0 ? gradviz_small_splat(a) : -1;
            Py_ssize_t splat_b = m < 0 ? gradviz_small_splat(b) : -1;
            if (splat_a >= 0 || splat_b >= 0)
                return gradviz_small_splat_arith(kernel, a, b, splat_a, splat_b);
        }
        if (n >= 0 && m >= 0) {
            gradviz_small_array *x = (gradviz_small_array *)a, *y = (gradviz_small_array *)b;
            if (x->descr != y->descr) Py_RETURN_NONE;
            if (x->nd == y->nd) {
                int i;
                for (i = 0; i < x->nd; i++)
                    if (x->dimensions[i] != y->dimensions[i]) Py_RETURN_NONE;
                big = x; other = y; side = 0;
            } else if (y->nd == 0) {
                big = x; side = 1;
                s = x->descr == gradviz_small_f32 ? *(float *)y->data : *(double *)y->data;
            } else if (x->nd == 0) {
                big = y; side = 2; n = m;
                s = y->descr == gradviz_small_f32 ? *(float *)x->data : *(double *)x->data;
            } else {
                Py_RETURN_NONE;
            }
        } else if (n >= 0) {
            big = (gradviz_small_array *)a; side = 1;
            if (!gradviz_small_number(b, big->descr == gradviz_small_f32, &s)) Py_RETURN_NONE;
        } else if (m >= 0) {
            big = (gradviz_small_array *)b; side = 2; n = m;
            if (!gradviz_small_number(a, big->descr == gradviz_small_f32, &s)) Py_RETURN_NONE;
        } else {
            Py_RETURN_NONE;
        }
    }
    Py_INCREF(big->descr);  /* PyArray_NewFromDescr steals it */
    out = gradviz_new_from_descr((PyTypeObject *)gradviz_small_ndarray, big->descr, big->nd,
                                 big->dimensions, NULL, NULL, 0, NULL);
    if (out == NULL) return NULL;
    {
        /* negation is the loops' default case (kernel 0) */
        int code = kernel == 5 ? 0 : kernel;
        const char *y = other != NULL ? other->data : NULL;
        char *o = ((gradviz_small_array *)out)->data;
        if (big->descr == gradviz_small_f32)
            GRADVIZ_SMALL_LOOPS(float, big->data, y, s, o, n, code, side);
        else
            GRADVIZ_SMALL_LOOPS(double, big->data, y, s, o, n, code, side);
    }
    return out;
}

#define GRADVIZ_ROWS_MAX 65536  /* elements; above it numpy's SIMD loops win */

#define GRADVIZ_ROWS_LOOPS(T, x, v, o, rows, columns, kernel, side)                     \
    do {                                                                             \
        const T *xs = (const T *)(x); const T *vs = (const T *)(v); T *os = (T *)(o);  \
        Py_ssize_t i_, j_;                                                           \
        for (i_ = 0; i_ < (rows); i_++, xs += (columns), os += (columns)) {          \
            switch ((kernel) * 3 + (side)) {                                         \
            case 4:  for (j_ = 0; j_ < (columns); j_++) os[j_] = xs[j_] + vs[j_]; break; \
            case 5:  for (j_ = 0; j_ < (columns); j_++) os[j_] = vs[j_] + xs[j_]; break; \
            case 7:  for (j_ = 0; j_ < (columns); j_++) os[j_] = xs[j_] - vs[j_]; break; \
            case 8:  for (j_ = 0; j_ < (columns); j_++) os[j_] = vs[j_] - xs[j_]; break; \
            case 10: for (j_ = 0; j_ < (columns); j_++) os[j_] = xs[j_] * vs[j_]; break; \
            case 11: for (j_ = 0; j_ < (columns); j_++) os[j_] = vs[j_] * xs[j_]; break; \
            case 13: for (j_ = 0; j_ < (columns); j_++) os[j_] = xs[j_] / vs[j_]; break; \
            default: for (j_ = 0; j_ < (columns); j_++) os[j_] = vs[j_] / xs[j_]; break; \
            }                                                                        \
        }                                                                            \
    } while (0)

/* kernel (1 add .. 4 div) of a C-contiguous float32/float64 array of 2+ dims and a
   C-contiguous 1-D array of its dtype with as many entries as its last dim, on either side
   (``x @ W + b``'s bias on every row, a row of means subtracted): numpy's broadcast, each
   element one IEEE operation in the dtype, into numpy's new C-contiguous array of the big
   operand's shape. The vector holds no NaN: where both operands are NaN numpy's vectorized
   loops may keep either payload. None (a new reference) when not covered. */
static inline PyObject *gradviz_small_rows(int kernel, PyObject *a, PyObject *b) {
    gradviz_small_array *x = (gradviz_small_array *)a, *y = (gradviz_small_array *)b;
    gradviz_small_array *big, *row;
    Py_ssize_t n, columns, j;
    int side;  /* 1: big (op) row, 2: row (op) big */
    PyObject *out;
    if (gradviz_new_from_descr == NULL || kernel < 1 || kernel > 4 || b == NULL) Py_RETURN_NONE;
    if (gradviz_flat_size(a, 0) < 0 || gradviz_flat_size(b, 0) < 0 || x->descr != y->descr)
        Py_RETURN_NONE;
    if (y->nd == 1 && x->nd >= 2) {
        big = x; row = y; side = 1;
    } else if (x->nd == 1 && y->nd >= 2) {
        big = y; row = x; side = 2;
    } else {
        Py_RETURN_NONE;
    }
    columns = row->dimensions[0];
    if (columns == 0 || big->dimensions[big->nd - 1] != columns) Py_RETURN_NONE;
    n = gradviz_flat_size((PyObject *)big, 0);
    if (n > GRADVIZ_ROWS_MAX) Py_RETURN_NONE;
    if (row->descr == gradviz_small_f32) {
        const float *v = (const float *)row->data;
        for (j = 0; j < columns; j++)
            if (v[j] != v[j]) Py_RETURN_NONE;
    } else {
        const double *v = (const double *)row->data;
        for (j = 0; j < columns; j++)
            if (v[j] != v[j]) Py_RETURN_NONE;
    }
    Py_INCREF(big->descr);  /* PyArray_NewFromDescr steals it */
    out = gradviz_new_from_descr((PyTypeObject *)gradviz_small_ndarray, big->descr, big->nd,
                                 big->dimensions, NULL, NULL, 0, NULL);
    if (out == NULL) return NULL;
    if (big->descr == gradviz_small_f32)
        GRADVIZ_ROWS_LOOPS(float, big->data, row->data, ((gradviz_small_array *)out)->data,
                           n / columns, columns, kernel, side);
    else
        GRADVIZ_ROWS_LOOPS(double, big->data, row->data, ((gradviz_small_array *)out)->data,
                           n / columns, columns, kernel, side);
    return out;
}

/* a += b in place, for a writeable small array a and an array b of its dtype and shape
   that does not partly overlap it: 1 when done, 0 when not covered (numpy's add then) */
static inline int gradviz_small_add_into(PyObject *a, PyObject *b) {
    gradviz_small_array *x = (gradviz_small_array *)a, *y = (gradviz_small_array *)b;
    Py_ssize_t n, k, bytes;
    int i;
    if (gradviz_new_from_descr == NULL) return 0;
    n = gradviz_flat_size(a, 1);
    if (n < 0 || n > GRADVIZ_SMALL_MAX || gradviz_small_size(b) != n) return 0;
    if (x->descr != y->descr || x->nd != y->nd) return 0;
    for (i = 0; i < x->nd; i++)
        if (x->dimensions[i] != y->dimensions[i]) return 0;
    bytes = n * (x->descr == gradviz_small_f32 ? 4 : 8);
    if (x->data != y->data && x->data < y->data + bytes && y->data < x->data + bytes)
        return 0;
    if (x->descr == gradviz_small_f32) {
        float *xs = (float *)x->data; const float *ys = (const float *)y->data;
        for (k = 0; k < n; k++) xs[k] += ys[k];
    } else {
        double *xs = (double *)x->data; const double *ys = (const double *)y->data;
        for (k = 0; k < n; k++) xs[k] += ys[k];
    }
    return 1;
}

#endif  /* GRADVIZ_SMALL_KERNELS_H */
