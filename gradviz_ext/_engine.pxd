# Declarations that make _engine.py's classes extension types when compiled.
# Checks stay on (no boundscheck/wraparound directives): the engine indexes Python lists
# and tuples, and a wrong index must raise, never read memory.
cimport cython

# The C helpers live in gradviz_ext/c/, each explained in its header.
# Type objects: an instance made by a type's tp_new, a type's version tag, AccumulateGrad's name.
cdef extern from "c/type_objects.h":
    object gradviz_new_instance(object type)
    unsigned int gradviz_type_version(object type)
    int gradviz_name_accumulate_grad(object type) except -1

# A numpy array's dtype, shape and strides read from the array's C struct (exact ndarrays only).
cdef extern from "c/ndarray_head.h":
    object gradviz_array_dtype(object array, object ndarray)
    int gradviz_array_has_shape(object array, object ndarray, object shape)
    size_t gradviz_array_address(object array)
    int gradviz_array_unstrided_empty(object array, object ndarray)


cdef bint _grad_enabled
cdef bint _grad_mode
cdef bint _inference_mode
cdef unsigned long _owner_thread
cdef dict _thread_grad_modes
cdef dict _thread_modes
cdef Py_ssize_t _inference_threads
cdef tuple _DEFAULT_MODES
cpdef is_grad_enabled()
cpdef is_inference_mode_enabled()
cpdef set_grad_enabled_flag(mode)
cpdef set_inference_mode_flag(mode)
cdef _set_thread_modes(object ident, bint grad_mode, bint inference)


cdef class Runtime:
    cdef public object add, add_inplace, clone, detach, zeros, sum_to, cast, make, describe


cdef Runtime _rt
cpdef runtime()


@cython.freelist(256)  # allocated per op or per node: reuse freed ones
cdef class VersionCounter:
    cdef public long long value
    cdef public bint inference  # Note [Inference tensors]


cdef class TensorBase:
    cdef public object _data
    cdef public bint _requires_grad
    cdef public object grad_fn
    cdef public Py_ssize_t _output_nr
    cdef public object grad
    cdef public VersionCounter _version_counter
    cdef public object _base
    cdef public object _grad_accumulator
    cdef public bint _retains_grad
    cdef public object _hooks
    cdef public object _post_accumulate_hooks
    cdef public object _views      # a root base's weak references to its views
    cdef public int _view_kind     # one of the VIEW_* kinds of _engine.py
    cdef object __weakref__


cpdef track_view(TensorBase root, TensorBase view, TensorBase parent, int kind)

# A view's kind, Note [Views after their base changed] (_engine.py assigns the same values
# when interpreted).
cpdef enum:
    VIEW_DEFAULT = 0
    VIEW_NO_GRAD = 1
    VIEW_MULTI_OUTPUT = 2
    VIEW_INFERENCE_MODE = 3
    VIEW_CUSTOM_FUNCTION = 4


cdef long long _next_sequence_nr
cdef long long _next_node_id


@cython.freelist(256)  # allocated per op or per node: reuse freed ones
cdef class InputMeta:
    cdef public tuple shape
    cdef public object dtype
    cdef public object np_dtype


cdef class NodeExtras:
    cdef public object pre_hooks
    cdef public object post_hooks
    cdef public dict tensor_pre_hooks
    cdef public dict metadata
    cdef public object forward_site


cdef class Node:
    # the edges (Note [Inline edges]): the first two in fields, more as one tuple of edges
    cdef object _fn0
    cdef object _fn1
    cdef tuple _edge_tuple
    cdef public tuple _input_metadata
    cdef public long long _seq
    cdef public long long _id
    cdef public NodeExtras _extra  # hooks, metadata, forward site (Note [Rare node fields])
    cdef public bint _released
    cdef int _edge_count
    cdef int _nr0
    cdef int _nr1
    cdef public object _scope
    # a graph task's dependency count and pending input buffer (Note [Counts on nodes])
    cdef long long _dep_serial
    cdef Py_ssize_t _dep_count
    cdef object _dep_buffer
    cdef object __weakref__
    cdef object _edge_node(self, Py_ssize_t index)
    cdef Py_ssize_t _edge_nr(self, Py_ssize_t index)
    cdef _set_edges(self, tuple edges)
    # virtual and overridable from Python (custom Function nodes), but called from C
    cpdef _apply_grads(self, grads)
    cpdef _kind(self)
    cpdef _materializes_grads(self)
    cpdef saved_tensor_count(self)
    cpdef release_variables(self)


cdef class AccumulateGrad(Node):
    cdef public object variable
    cpdef _apply_grads(self, grads)


cdef class GraphRoot(Node):
    cdef public list grads
    cpdef _apply_grads(self, grads)


cdef NodeExtras _extras(Node node)
cpdef init_node(Node node, tuple next_functions, tuple input_metadata)
cdef init_node_edges(Node node, int count, object fn0, int nr0, object fn1, int nr1,
                     tuple input_metadata)
cpdef edge_node(TensorBase tensor)
cdef _init_node_rest(Node node, tuple input_metadata)
cdef object _changed_view_type
cpdef stored_grad_fn(TensorBase tensor)
cpdef gradient_edge(TensorBase tensor)
cpdef grad_accumulator(TensorBase tensor)


@cython.freelist(256)  # allocated per op or per node: reuse freed ones
cdef class SavedTensor:
    cdef public VersionCounter _version_counter
    cdef public long long _saved_version
    cdef public bint _is_output
    cdef public Py_ssize_t _output_nr
    cdef public bint _requires_grad
    cdef public object _tensor
    cdef public object _data
    cdef public bint _has_hooks
    cdef public object _packed
    cdef public object _unpack_hook
    cdef public object _grad_fn
    cdef public object _grad_accumulator
    cdef _init(self, TensorBase tensor, bint is_output)
    cpdef unpack(self, node)
    cpdef unpack_data(self, node)
    cpdef release(self)


cpdef SavedTensor save_tensor(TensorBase tensor, bint is_output)
cdef list _saved_tensors_hooks


cpdef forward_observer()
cdef object _default_observer
cdef object _forward_observer
cdef object _running_task
cdef dict _thread_tasks
cdef bint _anomaly_enabled
cdef object _scope
cdef dict _thread_scopes
cpdef current_scope()
cpdef set_current_scope(scope)
cpdef push_scope(module, label=*)


@cython.freelist(64)  # one per module call: reuse freed ones
cdef class ScopeFrame:
    cdef public object parent
    cdef public object module
    cdef public object label
    cdef public object resolved
    cdef public object calls
    cdef public object sequence
cdef bint _anomaly_check_nan
cpdef current_graph_task()
cpdef set_current_graph_task(task)
cpdef is_anomaly_enabled()
cpdef is_anomaly_check_nan_enabled()
cpdef default_observer()


