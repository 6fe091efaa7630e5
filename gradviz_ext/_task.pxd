# Declarations that make _task.py's classes extension types when compiled.
# Checks stay on (no boundscheck/wraparound directives): the task indexes Python lists
# and tuples, and a wrong index must raise, never read memory.
cimport cython
from cpython.ref cimport Py_REFCNT
from gradviz_ext._engine cimport (AccumulateGrad, GraphRoot, InputMeta, Node, Runtime,
                                  SavedTensor, TensorBase,
                                  current_graph_task, default_observer, gradient_edge,
                                  is_anomaly_check_nan_enabled, is_anomaly_enabled,
                                  is_grad_enabled, runtime,
                                  set_current_graph_task, set_grad_enabled_flag)
from gradviz_ext._ops cimport (OpNode, OpSpec, _add_arrays, _cache_enter, _cache_exit,
                              _dtype_of, _has_shape, _small_add_into, _wrap)


# A task's states (_task.py assigns the same values when interpreted).
cpdef enum:
    PAUSED = 0
    RUNNING = 1
    FINISHED = 2
    ABORTED = 3
    FAILED = 4

cdef Runtime _rt
cdef object _errstate_var
cdef object _errstate_quiet
cdef object _np_add, _ndarray
cdef bint _stealable(object grad)
cdef _add_inplace(target, grad)


@cython.freelist(256)  # allocated per op or per node: reuse freed ones
cdef class InputBuffer:
    cdef public Node node
    cdef public Py_ssize_t size
    cdef public object first   # a one-slot buffer's gradient (Note [Gradients as arrays])
    cdef public list grads     # the slots of any other buffer; None for one slot
    cdef public list owned
    cdef public long long order
    cdef public long long seq
    cpdef bint is_owned(self, Py_ssize_t slot)
    cpdef set_owned(self, Py_ssize_t slot)
    cpdef get(self, Py_ssize_t slot)
    cpdef put(self, Py_ssize_t slot, grad)
    cpdef list slots(self)


cdef InputBuffer _new_buffer(Node node, Py_ssize_t size)
cdef bint _runs_before(InputBuffer a, InputBuffer b)
cdef _heap_push(list heap, InputBuffer item)
cdef InputBuffer _heap_pop(list heap)
cdef bint _all_none(list grads)
cdef bint _takes_arrays(Node node)
cdef _data_of(grad)
cdef _as_tensor(grad)
cdef _wrap_arrays(InputBuffer buffer)
cdef list _tensor_slots(InputBuffer buffer)
cdef object _F32, _F64
cdef _array_sum(old, grad)
cdef int _MAX_LIVE
cdef long long _last_serial
cdef int _live_count
cdef long long _live_serials[32]
cdef bint _is_live(long long serial)
cdef _make_live(long long serial)
cdef _make_dead(long long serial)


cdef class EventLog:
    cdef public list records
    cdef public object number, ready, added, started, finished, bytes_left


cdef EventLog _log_of(object observer)
cpdef bint runs_outside_code(object node)
cpdef bint same_items(list first, list second)


cdef class GraphTask:
    cdef object __weakref__  # observers refer to their task weakly (no task <-> observer cycle)
    cdef public bint keep_graph
    cdef public bint create_graph
    cdef public bint made_grads
    cdef object _observer  # what ``observer`` gives back
    cdef readonly object _listener  # the observer, or None when it listens to nothing
    cdef public int state
    cdef public object error
    cdef public object error_node
    cdef public object current
    cdef public list _ready
    cdef public list _run
    cdef public InputBuffer _next
    cdef public long long _ready_counter
    cdef public dict _not_ready
    cdef public dict _dependencies
    cdef public dict _exec_info
    cdef public dict _captures
    cdef public list captured
    cdef public dict _retains
    cdef public double _started_at
    cdef public long long _executed
    cdef public object graph_root
    cdef public list roots
    cdef public object _exposed_to
    cdef public list _exposed_watch
    cdef public long long _serial
    cdef public Py_ssize_t _stored
    cdef InputBuffer _spare
    cdef _recycle(self, InputBuffer buffer)
    cdef InputBuffer _buffer_for(self, Node node, Py_ssize_t size)
    cdef bint _count_on_nodes(self, root)
    cdef _unstamp(self, root, long long serial)
    cdef _end_counts(self)
    cdef _compute_dependencies(self, root)
    # the hot loop (Note [Engine order]); not callable from Python
    cdef _step(self, bint managed=*)
    cdef _fail(self, Node node, object exc)
    cdef _push_ready(self, InputBuffer buffer)
    cdef _execute(self, Node node, InputBuffer buffer)
    cdef bint _log_finished(self, Node node, list arrived, list grads, object outputs,
                            double started)
    cdef _execute_arrays(self, Node node, InputBuffer buffer)
    cdef list _materialize(self, Node node, list grads)
    cdef list _validate(self, Node node, object outputs, bint arrays=*)
    cdef _distribute(self, Node node, list outputs)
    cdef object _conform(self, Node node, Py_ssize_t index, object grad, Node successor,
                         Py_ssize_t slot, bint arrays)
    cdef _send(self, Node node, Node successor, Py_ssize_t slot, object grad, object observer)
    cdef str _add_to_buffer(self, InputBuffer buffer, Py_ssize_t slot, object grad)
    cdef _accumulate(self, Node node, list grads, object owned_grad)
    cdef _accumulate_into(self, object variable, object grad, object owned_grad)
