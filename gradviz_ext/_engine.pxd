# Declarations that make _engine.py's classes extension types when compiled.
# Checks stay on (no boundscheck/wraparound directives): the engine indexes Python lists
# and tuples, and a wrong index must raise, never read memory.
cimport cython

# An instance of a Python subclass of an extension type, made by the type's tp_new (what
# ``cls()`` does before ``__init__``) without looking ``__new__`` up and calling it.
cdef extern from *:
    """
    static PyObject *gradviz_new_instance(PyObject *type) {
        PyObject *args = PyTuple_New(0);
        PyObject *instance;
        if (args == NULL) return NULL;
        instance = ((PyTypeObject *)type)->tp_new((PyTypeObject *)type, args, NULL);
        Py_DECREF(args);
        return instance;
    }
    """
    object gradviz_new_instance(object type)


cdef bint _grad_enabled
cdef unsigned long _owner_thread
cdef dict _thread_grad_modes
cpdef is_grad_enabled()
cpdef set_grad_enabled_flag(mode)


cdef class Runtime:
    cdef public object add, add_inplace, clone, detach, zeros, sum_to, cast, make, describe


cdef Runtime _rt
cpdef runtime()


@cython.freelist(256)  # allocated per op or per node: reuse freed ones
cdef class VersionCounter:
    cdef public long long value


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
    cdef object __weakref__


cdef long long _next_sequence_nr
cdef long long _next_node_id


@cython.freelist(256)  # allocated per op or per node: reuse freed ones
cdef class InputMeta:
    cdef public tuple shape
    cdef public object dtype
    cdef public object np_dtype


cdef class Node:
    cdef public tuple next_functions
    cdef public tuple _input_metadata
    cdef public long long _seq
    cdef public long long _id
    cdef public object _pre_hooks
    cdef public object _post_hooks
    cdef public dict _tensor_pre_hooks
    cdef public dict _metadata
    cdef public bint _released
    cdef public object _forward_site
    cdef object __weakref__
    # virtual and overridable from Python (custom Function nodes), but called from C
    cpdef apply(self, grads)
    cpdef _kind(self)
    cpdef _materializes_grads(self)
    cpdef saved_tensor_count(self)
    cpdef release_variables(self)


cdef class AccumulateGrad(Node):
    cdef public object variable
    cpdef apply(self, grads)


cdef class GraphRoot(Node):
    cdef public list grads
    cpdef apply(self, grads)


cpdef init_node(Node node, tuple next_functions, tuple input_metadata)
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
cdef bint _anomaly_check_nan
cpdef current_graph_task()
cpdef set_current_graph_task(task)
cpdef is_anomaly_enabled()
cpdef is_anomaly_check_nan_enabled()
cpdef default_observer()


