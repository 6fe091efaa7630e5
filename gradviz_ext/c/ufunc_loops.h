/* numpy's own inner loop of a one-operand ufunc for one dtype, called from C.
 *
 * numpy's float32 exp and tanh are numpy's vectorized code, picked for the CPU when numpy is
 * imported; a C library's expf and tanhf give other bits. A kernel that must give the numpy
 * code's bits (lstm_cell.h, Note [LSTM forward kernel]) calls the very loop np.exp or np.tanh
 * runs on contiguous data, without a ufunc call (argument parsing, dtype resolution and the
 * error-state lookup, about a microsecond) each time. The loop computes each entry on its own,
 * so a run over part of an array gives that part's bits of the whole array's (the tests check
 * it on every length and offset they use).
 *
 * The struct is the head of numpy's PyUFuncObject (numpy/ufuncobject.h), part of numpy's ABI
 * and unchanged from numpy 1.x to 2.x; gradviz_ufunc_loop_find checks it against the ufunc's
 * Python attributes before trusting it. numpy's type resolution takes the first loop in
 * ``types`` whose signature fits, and so does this.
 */
#ifndef GRADVIZ_UFUNC_LOOPS_H
#define GRADVIZ_UFUNC_LOOPS_H

#include <string.h>

/* numpy's PyUFuncGenericFunction (npy_intp is Py_ssize_t) */
typedef void (*gradviz_inner_loop)(char **args, const Py_ssize_t *dimensions,
                                   const Py_ssize_t *steps, void *data);

typedef struct {
    gradviz_inner_loop loop;  /* NULL: none found */
    void *data;
} gradviz_ufunc_loop;

typedef struct {
    PyObject_HEAD
    int nin, nout, nargs;
    int identity;
    gradviz_inner_loop *functions;
    void *const *data;
    int ntypes;
    int reserved1;
    const char *name;
    const char *types;
} gradviz_ufunc_head;

/* The int attribute `name` of `ufunc` equals `value` (1), or not or no such attribute (0). */
static inline int gradviz_ufunc_attr_is(PyObject *ufunc, const char *name, long value) {
    PyObject *found = PyObject_GetAttrString(ufunc, name);
    long got;
    if (found == NULL) {
        PyErr_Clear();
        return 0;
    }
    got = PyLong_Check(found) ? PyLong_AsLong(found) : -1;
    Py_DECREF(found);
    if (got == -1 && PyErr_Occurred()) PyErr_Clear();
    return got == value;
}

/* The loop of `ufunc` (an instance of `ufunc_type`, numpy.ufunc) from numpy type number
   `typenum` to itself: 1 and *found filled, or 0 (not a one-operand ufunc whose struct agrees
   with its attributes, or no such loop). */
static inline int gradviz_ufunc_loop_find(PyObject *ufunc, PyObject *ufunc_type, int typenum,
                                          gradviz_ufunc_loop *found) {
    const gradviz_ufunc_head *head = (const gradviz_ufunc_head *)ufunc;
    PyObject *name;
    int k, same_name;
    found->loop = NULL;
    found->data = NULL;
    if ((PyObject *)Py_TYPE(ufunc) != ufunc_type || head->nin != 1 || head->nout != 1
            || head->nargs != 2 || head->functions == NULL || head->types == NULL
            || head->name == NULL || !gradviz_ufunc_attr_is(ufunc, "nin", 1)
            || !gradviz_ufunc_attr_is(ufunc, "nout", 1)
            || !gradviz_ufunc_attr_is(ufunc, "ntypes", head->ntypes))
        return 0;
    name = PyObject_GetAttrString(ufunc, "__name__");
    if (name == NULL) {
        PyErr_Clear();
        return 0;
    }
    same_name = PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, head->name) == 0;
    Py_DECREF(name);
    if (!same_name) return 0;
    for (k = 0; k < head->ntypes; k++) {
        if (head->types[2 * k] == typenum && head->types[2 * k + 1] == typenum) {
            if (head->functions[k] == NULL) return 0;
            found->loop = head->functions[k];
            found->data = head->data == NULL ? NULL : head->data[k];
            return 1;
        }
    }
    return 0;
}

/* The loop over `n` contiguous entries of `itemsize` bytes from `in` to `out` (which may be
   `in`: numpy runs its in-place calls, out=x, the same way). */
static inline void gradviz_ufunc_loop_run(const gradviz_ufunc_loop *l, void *in, void *out,
                                          Py_ssize_t n, Py_ssize_t itemsize) {
    char *args[2];
    Py_ssize_t steps[2];
    args[0] = (char *)in;
    args[1] = (char *)out;
    steps[0] = steps[1] = itemsize;
    if (n > 0) l->loop(args, &n, steps, l->data);
}

#endif  /* GRADVIZ_UFUNC_LOOPS_H */
