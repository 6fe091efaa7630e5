# Declarations that make _ops.py's classes extension types when compiled.
cimport cython
from cpython.contextvars cimport PyContextVar_Reset, PyContextVar_Set, get_value
cdef extern from "Python.h":
    int PyContext_Enter(object context) except -1
    int PyContext_Exit(object context) except -1
from gradviz_ext._engine cimport (InputMeta, Node, SavedTensor, TensorBase, VersionCounter,
                                  forward_observer, gradient_edge, gradviz_array_dtype,
                                  gradviz_array_has_shape, gradviz_new_instance,
                                  init_node, is_grad_enabled, save_tensor)


cdef class OpSpec:
    cdef public str name
    cdef public str node
    cdef public object forward
    cdef public object backward
    cdef public object fast_backward
    cdef public object saves
    cdef public object dtype
    cdef public int dtype_rule
    cdef public bint view
    cdef public bint quiet
    cdef public int kernel
    cdef public list _saves_cache


cdef class OpNode(Node):
    cdef public OpSpec op
    cdef public tuple needs_input_grad
    cdef public dict attrs
    cdef public dict _saved_inputs
    cdef public SavedTensor _saved_output
    cpdef apply(self, grads)
    cdef list _apply_fast(self, grads)
    cdef list _kernel_backward(self, int kernel, grad, g)
    cpdef data(self, Py_ssize_t index)
    cpdef output_data(self)
    cpdef saved_tensor_count(self)
    cpdef release_variables(self)


cdef object _np_add, _np_subtract, _np_multiply, _np_divide, _np_negative
cdef object _ndarray
cdef object _dtype_of(object data)
cdef bint _has_shape(object data, tuple shape)
cpdef apply_op(OpSpec op, tuple inputs, dict attrs)
cdef object _unrecorded_binary(OpSpec op, object a, object b, dict attrs)
cdef OpSpec _op_add, _op_sub, _op_mul, _op_div, _op_neg
cdef InputMeta _meta(object tensor)
cdef list _recent_scalars
cdef object _quiet_context
cdef InputMeta _last_meta
cdef object _scalar_array(object value, object dtype)
cdef object _dtypes_by_numpy
cdef object _tensor_class
