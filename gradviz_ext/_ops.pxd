# Declarations that make _ops.py's classes extension types when compiled.
cimport cython
from cpython.contextvars cimport PyContextVar_Reset, PyContextVar_Set, get_value
cdef extern from "Python.h":
    int PyContext_Enter(object context) except -1
    int PyContext_Exit(object context) except -1
from gradviz_ext._engine cimport (InputMeta, Node, SavedTensor, TensorBase, VersionCounter,
                                  forward_observer, gradient_edge, gradviz_array_dtype,
                                  gradviz_array_has_shape, gradviz_new_instance,
                                  init_node, init_node_edges, edge_node, is_grad_enabled,
                                  save_tensor, track_view)


# Note [Small kernels] (gradviz_ext/_ops.py): add, sub, mul, div and neg of small C-contiguous
# float32/float64 arrays (or an array and one number of its dtype) computed by a C loop into
# an array made by numpy's own PyArray_NewFromDescr, found in numpy's C-API table (slot 94, part
# of numpy's ABI since 1.0) so that building needs no numpy headers. Arrays are read through
# _engine.pxd's gradviz_ndarray_head.
cdef extern from *:
    """
    #include <math.h>
    typedef gradviz_ndarray_head gradviz_small_array;  /* numpy's array head: _engine.pxd */

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
    static int gradviz_small_enable(PyObject *capsule, PyObject *ndarray, PyObject *f32,
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

    static void gradviz_small_disable(void) { gradviz_new_from_descr = NULL; }

    /* elements of an aligned, C-contiguous exact ndarray of float32/float64 (writeable when
       asked), else -1 */
    static Py_ssize_t gradviz_flat_size(PyObject *x, int writeable) {
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
    static Py_ssize_t gradviz_small_size(PyObject *x) {
        Py_ssize_t n = gradviz_flat_size(x, 0);
        return n > GRADVIZ_SMALL_MAX ? -1 : n;
    }

    /* A Python float or int as the scalar operand of an array of dtype f32 (else f64), the
       way numpy converts it; 0 when numpy's conversion could differ (an int beyond 2**53, or
       a finite float that overflows float32, which numpy warns about). */
    static int gradviz_small_number(PyObject *x, int f32, double *out) {
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

    /* kernel (1 add, 2 sub, 3 mul, 4 div, 5 neg: KERNEL_* in _ops.py) of a and b (b unused
       for neg). A new array, or None (a new reference) when the operands are not covered:
       then numpy's ufunc computes it. */
    static PyObject *gradviz_small_arith(int kernel, PyObject *a, PyObject *b) {
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

    /* a += b in place, for a writeable small array a and an array b of its dtype and shape
       that does not partly overlap it: 1 when done, 0 when not covered (numpy's add then) */
    static int gradviz_small_add_into(PyObject *a, PyObject *b) {
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
    """
    int gradviz_small_enable(object capsule, object ndarray, object f32, object f64) except -1
    void gradviz_small_disable()
    object gradviz_small_arith(int kernel, object a, object b)
    int gradviz_small_add_into(object a, object b)

cdef bint _small_add_into(object a, object b)


# Note [Whole-array kernels] (gradviz_ext/_ops.py): add/sub with an alpha as one fused
# multiply-add per element (PyTorch's rounding), in place or into a new array, relu's
# backward as one pass, and a matrix's transpose plus a row vector in tiles; for aligned
# C-contiguous float32/float64 arrays of any size.
cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>

    /* two covered arrays of one dtype and one shape: their size, else -1 */
    static Py_ssize_t gradviz_flat_pair(PyObject *a, PyObject *b, int writeable) {
        gradviz_small_array *x = (gradviz_small_array *)a, *y = (gradviz_small_array *)b;
        Py_ssize_t n = gradviz_flat_size(a, writeable);
        int i;
        if (n < 0 || gradviz_flat_size(b, 0) < 0) return -1;
        if (x->descr != y->descr || x->nd != y->nd) return -1;
        for (i = 0; i < x->nd; i++)
            if (x->dimensions[i] != y->dimensions[i]) return -1;
        return n;
    }

    static PyObject *gradviz_new_like(PyObject *like) {
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
    static void gradviz_fma_f32(float *o, const float *a, const float *b, float s,
                                Py_ssize_t n) {
        Py_ssize_t k;
        for (k = 0; k < n; k++) o[k] = __builtin_fmaf(s, b[k], a[k]);
    }
    __attribute__((target("avx2,fma")))
    static void gradviz_fma_f64(double *o, const double *a, const double *b, double s,
                                Py_ssize_t n) {
        Py_ssize_t k;
        for (k = 0; k < n; k++) o[k] = __builtin_fma(s, b[k], a[k]);
    }
    static void gradviz_fma_enable(void) {
        __builtin_cpu_init();
        gradviz_fma_ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    #else
    static void gradviz_fma_f32(float *o, const float *a, const float *b, float s,
                                Py_ssize_t n) {}
    static void gradviz_fma_f64(double *o, const double *a, const double *b, double s,
                                Py_ssize_t n) {}
    static void gradviz_fma_enable(void) { gradviz_fma_ok = 0; }
    #endif

    /* a + alpha * b, one rounding per element; into a when in_place (a is returned, a new
       reference), else into a new array. None (a new reference) when not covered: other
       dtypes or layouts, broadcasting, an alpha that is not a Python float or int exact in
       the dtype, arrays that overlap, or a CPU without FMA. */
    static PyObject *gradviz_fused_add(PyObject *a, PyObject *b, PyObject *alpha, int in_place) {
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
    static PyObject *gradviz_threshold_backward(PyObject *g, PyObject *result) {
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
    static PyObject *gradviz_transpose_add(PyObject *t, PyObject *bias) {
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
    """
    void gradviz_fma_enable()
    object gradviz_fused_add(object a, object b, object alpha, int in_place)
    object gradviz_threshold_backward(object g, object result)
    object gradviz_transpose_add(object t, object bias)


# Note [Array cache] (gradviz_ext/_ops.py): a numpy memory handler (NEP 49) that keeps the
# blocks of large arrays freed by gradviz for the next array of that size, set only while
# gradviz's own ops and backward run.
cdef extern from *:
    """
    #include <stdint.h>
    #if defined(__GLIBC__)
    #include <malloc.h>
    #include <pthread.h>
    #define GRADVIZ_CACHE_POSSIBLE 1
    #else
    #define GRADVIZ_CACHE_POSSIBLE 0
    #endif

    typedef struct {                      /* numpy's PyDataMem_Handler, version 1 (NEP 49) */
        char name[127];
        uint8_t version;
        void *ctx;
        void *(*malloc)(void *ctx, size_t size);
        void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
        void *(*realloc)(void *ctx, void *ptr, size_t new_size);
        void (*free)(void *ctx, void *ptr, size_t size);
    } gradviz_mem_handler;

    typedef PyObject *(*gradviz_set_handler_fn)(PyObject *);

    #define GRADVIZ_CACHE_SLOTS 64
    #define GRADVIZ_CACHE_MIN ((size_t)32768)   /* bytes: smaller blocks go to malloc */
    #define GRADVIZ_CACHE_LARGE 8192            /* elements of an input that enters the cache */

    static gradviz_set_handler_fn gradviz_set_handler = NULL;
    static PyObject *gradviz_cache_capsule = NULL;
    static size_t gradviz_cache_limit = 0, gradviz_cache_bytes = 0;
    static size_t gradviz_cache_hits = 0, gradviz_cache_misses = 0;
    static int gradviz_cache_count = 0;
    static struct { void *ptr; size_t size; } gradviz_cache[GRADVIZ_CACHE_SLOTS];

    #if GRADVIZ_CACHE_POSSIBLE
    static pthread_mutex_t gradviz_cache_lock = PTHREAD_MUTEX_INITIALIZER;

    /* a kept block of at least size bytes and at most a quarter more, newest first */
    static void *gradviz_cache_malloc(void *ctx, size_t size) {
        int i;
        void *ptr;
        if (size >= GRADVIZ_CACHE_MIN) {
            pthread_mutex_lock(&gradviz_cache_lock);
            for (i = gradviz_cache_count - 1; i >= 0; i--) {
                if (gradviz_cache[i].size >= size && gradviz_cache[i].size - size <= size / 4) {
                    ptr = gradviz_cache[i].ptr;
                    gradviz_cache_bytes -= gradviz_cache[i].size;
                    gradviz_cache_count--;
                    memmove(&gradviz_cache[i], &gradviz_cache[i + 1],
                            (size_t)(gradviz_cache_count - i) * sizeof(gradviz_cache[0]));
                    gradviz_cache_hits++;
                    pthread_mutex_unlock(&gradviz_cache_lock);
                    return ptr;
                }
            }
            gradviz_cache_misses++;
            pthread_mutex_unlock(&gradviz_cache_lock);
        }
        return malloc(size);
    }

    static void *gradviz_cache_calloc(void *ctx, size_t nelem, size_t elsize) {
        return calloc(nelem, elsize);  /* fresh pages are zero already: nothing to save */
    }

    static void *gradviz_cache_realloc(void *ctx, void *ptr, size_t new_size) {
        return realloc(ptr, new_size);  /* every block came from malloc */
    }

    /* keep a large block (its real size, from malloc), dropping the oldest kept ones to stay
       within the slots and the byte limit */
    static void gradviz_cache_free(void *ctx, void *ptr, size_t size) {
        size_t usable;
        if (ptr == NULL) return;
        usable = malloc_usable_size(ptr);
        if (usable >= GRADVIZ_CACHE_MIN && usable <= gradviz_cache_limit) {
            pthread_mutex_lock(&gradviz_cache_lock);
            while (gradviz_cache_count > 0 && (gradviz_cache_count == GRADVIZ_CACHE_SLOTS
                    || gradviz_cache_bytes + usable > gradviz_cache_limit)) {
                free(gradviz_cache[0].ptr);
                gradviz_cache_bytes -= gradviz_cache[0].size;
                gradviz_cache_count--;
                memmove(&gradviz_cache[0], &gradviz_cache[1],
                        (size_t)gradviz_cache_count * sizeof(gradviz_cache[0]));
            }
            gradviz_cache[gradviz_cache_count].ptr = ptr;
            gradviz_cache[gradviz_cache_count].size = usable;
            gradviz_cache_count++;
            gradviz_cache_bytes += usable;
            pthread_mutex_unlock(&gradviz_cache_lock);
            return;
        }
        free(ptr);
    }

    static gradviz_mem_handler gradviz_cache_handler = {
        "gradviz_array_cache", 1, NULL, gradviz_cache_malloc, gradviz_cache_calloc,
        gradviz_cache_realloc, gradviz_cache_free};
    #endif

    /* Find numpy's PyDataMem_SetHandler (C-API slot 304, numpy >= 1.22) and make the
       handler's capsule. 0 on success, -1 with an exception set. */
    static int gradviz_cache_enable(PyObject *api_capsule, Py_ssize_t limit) {
    #if GRADVIZ_CACHE_POSSIBLE
        void **api = (void **)PyCapsule_GetPointer(api_capsule, NULL);
        if (api == NULL) return -1;
        if (gradviz_cache_capsule == NULL) {
            gradviz_cache_capsule = PyCapsule_New(&gradviz_cache_handler, "mem_handler", NULL);
            if (gradviz_cache_capsule == NULL) return -1;
        }
        gradviz_cache_limit = (size_t)limit;
        gradviz_set_handler = (gradviz_set_handler_fn)api[304];
        return 0;
    #else
        PyErr_SetString(PyExc_RuntimeError, "the array cache needs glibc");
        return -1;
    #endif
    }

    static void gradviz_cache_disable(void) { gradviz_set_handler = NULL; }

    /* Make the cache numpy's handler in this context: the previous handler (a new
       reference), to give back to gradviz_cache_exit; None when the cache is off. */
    static PyObject *gradviz_cache_enter(void) {
        if (gradviz_set_handler == NULL) Py_RETURN_NONE;
        return gradviz_set_handler(gradviz_cache_capsule);
    }

    static int gradviz_cache_exit(PyObject *previous) {
        PyObject *ours;
        if (previous == Py_None) return 0;
        ours = gradviz_set_handler(previous);
        if (ours == NULL) return -1;
        Py_DECREF(ours);
        return 0;
    }

    /* an exact ndarray of at least GRADVIZ_CACHE_LARGE elements */
    static int gradviz_cache_wanted(PyObject *x) {
        gradviz_small_array *a = (gradviz_small_array *)x;
        Py_ssize_t n = 1;
        int i;
        if (gradviz_set_handler == NULL || (PyObject *)Py_TYPE(x) != gradviz_small_ndarray)
            return 0;
        for (i = 0; i < a->nd; i++) n *= a->dimensions[i];
        return n >= GRADVIZ_CACHE_LARGE;
    }

    /* free every kept block; with limit >= 0 also set the byte limit */
    static void gradviz_cache_clear(Py_ssize_t limit) {
    #if GRADVIZ_CACHE_POSSIBLE
        pthread_mutex_lock(&gradviz_cache_lock);
        while (gradviz_cache_count > 0) {
            gradviz_cache_count--;
            free(gradviz_cache[gradviz_cache_count].ptr);
        }
        gradviz_cache_bytes = 0;
        if (limit >= 0) gradviz_cache_limit = (size_t)limit;
        pthread_mutex_unlock(&gradviz_cache_lock);
    #endif
    }

    static PyObject *gradviz_cache_stats(void) {
        return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n}", "hits", (Py_ssize_t)gradviz_cache_hits,
                             "misses", (Py_ssize_t)gradviz_cache_misses,
                             "blocks", (Py_ssize_t)gradviz_cache_count,
                             "bytes", (Py_ssize_t)gradviz_cache_bytes,
                             "limit", (Py_ssize_t)gradviz_cache_limit);
    }
    """
    int gradviz_cache_enable(object api_capsule, Py_ssize_t limit) except -1
    void gradviz_cache_disable()
    object gradviz_cache_enter()
    int gradviz_cache_exit(object previous) except -1
    bint gradviz_cache_wanted(object x)
    void gradviz_cache_clear(Py_ssize_t limit)
    object gradviz_cache_stats()


# Note [Node classes] (gradviz_ext/_ops.py): a subclass of OpNode named ``name`` made as C
# extension types are (PyTorch makes its node classes the same way): a type object that is no
# heap type, with a name without a dot (its module is ``builtins``) and every slot inherited
# from OpNode by PyType_Ready. Unlike a Python subclass, its instances are allocated, freed and
# dispatched exactly as OpNode's: Cython checks cpdef methods for Python overrides only on heap
# types and on types with a __dict__. The type and its name are never freed.
cdef extern from *:
    """
    #include <stdlib.h>
    #include <string.h>

    static PyObject *gradviz_node_class(PyObject *base, PyObject *name) {
        Py_ssize_t size;
        const char *utf8 = PyUnicode_AsUTF8AndSize(name, &size);
        PyTypeObject *t;
        char *kept;
        if (utf8 == NULL) return NULL;
        t = (PyTypeObject *)calloc(1, sizeof(PyTypeObject));
        kept = (char *)malloc((size_t)size + 1);
        if (t == NULL || kept == NULL) {
            free(t);
            free(kept);
            return PyErr_NoMemory();
        }
        memcpy(kept, utf8, (size_t)size + 1);
        Py_SET_TYPE((PyObject *)t, &PyType_Type);
        Py_SET_REFCNT((PyObject *)t, 1);
        t->tp_name = kept;
        t->tp_basicsize = ((PyTypeObject *)base)->tp_basicsize;
        t->tp_itemsize = ((PyTypeObject *)base)->tp_itemsize;
        t->tp_flags = Py_TPFLAGS_DEFAULT;
        t->tp_base = (PyTypeObject *)base;
        Py_INCREF(base);
        if (PyType_Ready(t) < 0) return NULL;  /* leaks the two blocks: never expected */
        Py_INCREF((PyObject *)t);  /* ours, forever: a static type is never freed */
        return (PyObject *)t;
    }
    """
    object gradviz_node_class(object base, object name)


cdef class OpSpec:
    cdef public str name
    cdef public str node
    cdef public object node_class
    cdef public object forward
    cdef public object backward
    cdef public object fast_backward
    cdef public object saves
    cdef public object dtype
    cdef public int dtype_rule
    cdef public bint view
    cdef public bint quiet
    cdef public int kernel
    cdef public bint fills_missing
    cdef public list _saves_cache


cdef class OpNode(Node):
    cdef public OpSpec op
    cdef public tuple needs_input_grad
    cdef public dict attrs
    cdef public tuple _kept_inputs
    cdef public SavedTensor _saved_output
    cpdef _apply_grads(self, grads)
    cpdef _materializes_grads(self)
    cdef list _apply_fast(self, grads)
    cdef list _kernel_backward(self, int kernel, grad, g)
    cpdef data(self, Py_ssize_t index)
    cdef _operand(self, Py_ssize_t index)
    cdef _kept(self, Py_ssize_t index)
    cpdef output_data(self)
    cpdef saved_tensor_count(self)
    cpdef release_variables(self)


cdef object _np_add, _np_subtract, _np_multiply, _np_divide, _np_negative
cdef object _ndarray
cdef object _NOT_SAVED
cdef object _dtype_of(object data)
cdef bint _has_shape(object data, tuple shape)
cdef object _cache_enter()
cdef int _cache_exit(object previous) except -1
cpdef apply_op(OpSpec op, tuple inputs, dict attrs)
cdef object _unrecorded_binary(OpSpec op, object a, object b, dict attrs)
cdef OpSpec _op_add, _op_sub, _op_mul, _op_div, _op_neg
cdef InputMeta _meta(object tensor)
cdef list _recent_scalars
cdef object _quiet_context
cdef dict _ALPHA_ONE
cdef InputMeta _last_meta
cdef tuple _last_metas
cdef tuple _one_meta(object tensor)
cdef tuple _last_kept
cdef tuple _kept_tuple(tuple inputs, object input_indices)
cdef object _scalar_array(object value, object dtype)
cdef object _dtypes_by_numpy
cdef object _tensor_class


# Note [GELU kernels] (gradviz/ops/_activation.py): the exact GELU of contiguous float32
# arrays and its derivative, one vectorized pass each (gradviz_ext/c/gelu.h).
cdef extern from "c/gelu.h":
    int gradviz_gelu_enable()
    void gradviz_gelu_forward_f32(const float *x, float *out, Py_ssize_t n,
                                  int posinf_is_nan) nogil
    void gradviz_gelu_backward_f32(const float *x, const float *g, float *out,
                                   Py_ssize_t n) nogil
