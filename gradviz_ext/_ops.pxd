# Declarations that make _ops.py's classes extension types when compiled.
cimport cython
from gradviz_ext._engine cimport InputMeta, Node, SavedTensor, TensorBase, VersionCounter


cdef class OpSpec:
    cdef public str name
    cdef public str node
    cdef public object forward
    cdef public object backward
    cdef public object saves
    cdef public object dtype
    cdef public int dtype_rule
    cdef public bint view
    cdef public bint quiet


cdef class OpNode(Node):
    cdef public OpSpec op
    cdef public tuple needs_input_grad
    cdef public dict attrs
    cdef public dict _saved_inputs
    cdef public SavedTensor _saved_output
    cpdef saved_tensor_count(self)
    cpdef release_variables(self)


cdef object _dtypes_by_numpy
cdef object _tensor_class
