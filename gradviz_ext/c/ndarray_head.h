/* Reading a numpy array's dtype, shape and strides from the array's C struct.
 *
 * Included by gradviz_ext/_engine.pxd (Cython copies the include into every
 * module that cimports it); static functions only, after Python.h.
 */
#ifndef GRADVIZ_NDARRAY_HEAD_H
#define GRADVIZ_NDARRAY_HEAD_H

/* A numpy array's dtype and shape read from the array itself, for exact ndarrays (``ndarray``
 * is numpy.ndarray, passed in: this file does not import numpy). ``.shape`` builds a tuple and
 * both attribute lookups go through the type; the engine asks for them on every op and node.
 * The struct is the head of numpy's PyArrayObject_fields (numpy/ndarraytypes.h), which numpy
 * keeps fixed as part of its ABI (extensions built against numpy 1.x run on 2.x). */
typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} gradviz_ndarray_head;

static inline PyObject *gradviz_array_dtype(PyObject *array, PyObject *ndarray) {
    if ((PyObject *)Py_TYPE(array) == ndarray) {
        PyObject *descr = ((gradviz_ndarray_head *)array)->descr;
        Py_INCREF(descr);
        return descr;
    }
    return PyObject_GetAttrString(array, "dtype");
}

/* 1: the array has this shape (a tuple of ints), 0: it has not,
   -1: not an exact ndarray or not a tuple (compare .shape instead). */
static inline int gradviz_array_has_shape(PyObject *array, PyObject *ndarray, PyObject *shape) {
    gradviz_ndarray_head *head = (gradviz_ndarray_head *)array;
    Py_ssize_t i, n, size;
    if ((PyObject *)Py_TYPE(array) != ndarray || !PyTuple_Check(shape)) return -1;
    n = PyTuple_GET_SIZE(shape);
    if (head->nd != n) return 0;
    for (i = 0; i < n; i++) {
        size = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
        if (size == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return -1;
        }
        if (size != head->dimensions[i]) return 0;
    }
    return 1;
}

/* The address of an exact ndarray's first element (the caller checks the type). */
static inline size_t gradviz_array_address(PyObject *array) {
    return (size_t)((gradviz_ndarray_head *)array)->data;
}

/* 1: an exact ndarray of no elements whose strides are all 0, as numpy lays out every new
   empty array (Note [Empty tensors' strides] in gradviz_ext/_ops.py); 0: any other object.
   A non-empty array returns at its first nonzero stride, in practice the first. */
static inline int gradviz_array_unstrided_empty(PyObject *array, PyObject *ndarray) {
    gradviz_ndarray_head *head = (gradviz_ndarray_head *)array;
    int i, empty = 0;
    if ((PyObject *)Py_TYPE(array) != ndarray) return 0;
    for (i = 0; i < head->nd; i++) {
        if (head->strides[i] != 0) return 0;
        if (head->dimensions[i] == 0) empty = 1;
    }
    return empty;
}

#endif  /* GRADVIZ_NDARRAY_HEAD_H */
