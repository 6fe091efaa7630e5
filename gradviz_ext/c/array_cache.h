/* A numpy memory handler that recycles large blocks (Note [Array cache]).
 *
 * Included by gradviz_ext/_ops.pxd (Cython copies the include into every
 * module that cimports it); static functions only, after Python.h.
 */
#ifndef GRADVIZ_ARRAY_CACHE_H
#define GRADVIZ_ARRAY_CACHE_H

/* Note [Array cache] (gradviz_ext/_ops.py): a numpy memory handler (NEP 49) that keeps the
 * blocks of large arrays freed by gradviz for the next array of that size, set only while
 * gradviz's own ops and backward run. */
#include <stdint.h>
#if defined(__GLIBC__)
#include <malloc.h>
#include <pthread.h>
#define GRADVIZ_CACHE_POSSIBLE 1
#else
#define GRADVIZ_CACHE_POSSIBLE 0
#endif
#include "small_kernels.h"  /* gradviz_small_array, gradviz_small_ndarray */

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
static inline void *gradviz_cache_malloc(void *ctx, size_t size) {
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

static inline void *gradviz_cache_calloc(void *ctx, size_t nelem, size_t elsize) {
    return calloc(nelem, elsize);  /* fresh pages are zero already: nothing to save */
}

static inline void *gradviz_cache_realloc(void *ctx, void *ptr, size_t new_size) {
    return realloc(ptr, new_size);  /* every block came from malloc */
}

/* keep a large block (its real size, from malloc), dropping the oldest kept ones to stay
   within the slots and the byte limit */
static inline void gradviz_cache_free(void *ctx, void *ptr, size_t size) {
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
static inline int gradviz_cache_enable(PyObject *api_capsule, Py_ssize_t limit) {
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

static inline void gradviz_cache_disable(void) { gradviz_set_handler = NULL; }

/* Make the cache numpy's handler in this context: the previous handler (a new
   reference), to give back to gradviz_cache_exit; None when the cache is off. */
static inline PyObject *gradviz_cache_enter(void) {
    if (gradviz_set_handler == NULL) Py_RETURN_NONE;
    return gradviz_set_handler(gradviz_cache_capsule);
}

static inline int gradviz_cache_exit(PyObject *previous) {
    PyObject *ours;
    if (previous == Py_None) return 0;
    ours = gradviz_set_handler(previous);
    if (ours == NULL) return -1;
    Py_DECREF(ours);
    return 0;
}

/* an exact ndarray of at least GRADVIZ_CACHE_LARGE elements */
static inline int gradviz_cache_wanted(PyObject *x) {
    gradviz_small_array *a = (gradviz_small_array *)x;
    Py_ssize_t n = 1;
    int i;
    if (gradviz_set_handler == NULL || (PyObject *)Py_TYPE(x) != gradviz_small_ndarray)
        return 0;
    for (i = 0; i < a->nd; i++) n *= a->dimensions[i];
    return n >= GRADVIZ_CACHE_LARGE;
}

/* free every kept block; with limit >= 0 also set the byte limit */
static inline void gradviz_cache_clear(Py_ssize_t limit) {
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

static inline PyObject *gradviz_cache_stats(void) {
    return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n}", "hits", (Py_ssize_t)gradviz_cache_hits,
                         "misses", (Py_ssize_t)gradviz_cache_misses,
                         "blocks", (Py_ssize_t)gradviz_cache_count,
                         "bytes", (Py_ssize_t)gradviz_cache_bytes,
                         "limit", (Py_ssize_t)gradviz_cache_limit);
}

#endif  /* GRADVIZ_ARRAY_CACHE_H */
