# Declarations that make _function.py's classes extension types when compiled.
cimport cython
from gradviz_ext._engine cimport (InputMeta, Node, SavedTensor, TensorBase, current_graph_task,
                                  forward_observer, gradient_edge, gradviz_new_instance,
                                  gradviz_type_version,
                                  init_node, is_grad_enabled, save_tensor, set_grad_enabled_flag)


from gradviz_ext._ops cimport _meta as _output_meta


cdef class FunctionNode(Node):
    cdef public bint materialize_grads
    cdef public tuple needs_input_grad
    cdef public object _to_save
    cdef public list _saved
    cdef public object _dirty_tensors
    cdef public object _non_differentiable
    cdef public object _output_grad_dtypes
    cdef public tuple _output_dtypes
    cdef public tuple _tensor_input_positions
    cdef public Py_ssize_t _num_forward_inputs
    cdef public tuple _forward_constants
    cdef public tuple _forward_inputs
    cdef public tuple _forward_versions
    cdef public bint _in_backward
    cpdef _apply_grads(self, grads)
    cpdef _kind(self)
    cpdef _materializes_grads(self)
    cpdef saved_tensor_count(self)
    cpdef release_variables(self)


cdef _init_fields(FunctionNode node)
cdef object _new_ctx(object backward_cls)
cdef dict _plain_init
cdef bint _keep_forward_inputs
cdef object _backward_of(FunctionNode node)
cdef object _check_result(FunctionNode node, object result)
cdef object _wrap_single(FunctionNode node, tuple args, TensorBase raw, bint executable)
