# cython: language_level=3
"""Graph tasks: one backward pass, executed node by node (Note [Engine order]).

``GraphTask`` is the engine's algorithm: the dependency count of every reachable node, the
input buffers that sum the gradients reaching each node, the ready queue, and the seven steps
of running one node. Like ``_engine.py`` (the graph and tensor types it works on) this file is
Cython pure-Python mode: ``_task.pxd`` compiles it; ``GRADVIZ_PURE_PYTHON=1`` runs it
interpreted.

Note [Engine order]
-------------------
A graph task executes one node per ``step()``, in PyTorch's order:

1. tensor pre-hooks of each input slot, then the node's pre-hooks;
2. zero-materialization of missing gradients (custom Functions that ask for it, and
   built-in nodes that received at least one gradient, except split and unbind nodes,
   whose rules fill them: Note [Rules that fill missing gradients] in _ops.py);
3. the node's backward (``Node._apply_grads``), under grad mode only with ``create_graph``;
4. validation of the results: one per edge, shape reduced or rejected, dtype cast to what
   the successor expects;
5. the node's post-hooks;
6. release of saved tensors unless the graph is retained;
7. each result is added to its successor's input buffer; a successor whose dependency
   count reaches zero joins the ready queue, ordered by higher ``sequence_nr`` first.

Note [Observer cost]
--------------------
Every event point is ``if observer is not None: observer.<kind>(...)``. Without an
observer nothing is built, so the idle cost is one pointer test per point. The lists an
observer is handed (``grads``, ``grads_in``, ``grads_out``...) are new at each call: the
observer may keep them.

An observer that overrides none of the backward callbacks of ``Observer`` (whose methods do
nothing) would only be handed lists and copies to drop: the task keeps it as ``observer``
but runs as if it had none (``_listener`` is None, ``_listens``), so such an idle observer
costs nothing, not even the arrays path of Note [Gradients as arrays]. Measured on the GPT
step of bench/models.py (bench/instrument.py --model gpt): a do-nothing ``Observer()`` on
the pass cost 1.03-1.04x a plain backward when every point called it.
"""

import time

import cython
import numpy

from gradviz_ext._anomaly import check_nan, report_anomaly
from gradviz_ext._errstate import ERRSTATE, QUIET
from gradviz_ext._engine import BACKWARD_CALLBACKS, Observer
from gradviz_ext._ops import make_tensor_as_laid_out

if not cython.compiled:  # compiled, these come from the cimport in _task.pxd
    from gradviz_ext._engine import (AccumulateGrad, GraphRoot, InputMeta, Node, SavedTensor,
                                     TensorBase,
                                     current_graph_task, default_observer, gradient_edge,
                                     is_anomaly_check_nan_enabled, is_anomaly_enabled,
                                     is_grad_enabled, runtime, set_current_graph_task,
                                     set_grad_enabled_flag)
    from gradviz_ext._ops import (OpNode, OpSpec, _add_arrays, _cache_enter, _cache_exit,
                                  _dtype_of, _has_shape, _small_add_into, _wrap)

_rt = runtime()

# Note [Quiet backward]: PyTorch never warns about inf or NaN; numpy does unless told not to.
# A graph task silences numpy's floating-point warnings while it runs nodes, with one context
# variable set per run() or step() rather than one per op (gradviz_ext/_errstate.py). Forward
# ops silence themselves (gradviz_ext._ops, Note [Op fast paths]).
_errstate_var = ERRSTATE
_errstate_quiet = QUIET
_np_add = numpy.add
_ndarray = numpy.ndarray


# A task's states. Compiled, the .pxd's cpdef enum makes them C constants (read on every node)
# and ints from Python; interpreted, these assignments make them.
if not cython.compiled:
    PAUSED = 0
    RUNNING = 1
    FINISHED = 2
    ABORTED = 3
    FAILED = 4
_STATE_NAMES = ("paused", "running", "finished", "aborted", "error")


class InputBuffer:
    """The gradients that reached one pending node so far, slot by slot, summed.

    A buffer of ``size`` slots: one slot's gradient is ``first`` (no list), more are the
    list ``grads``; ``get``, ``put`` and ``slots`` read and write either. A gradient is a
    Tensor or, from a fast rule, a numpy array (Note [Gradients as arrays]). ``owned`` is
    None until the engine sums two contributions; then ``owned[i]`` says the engine created
    slot ``i``'s gradient itself (a sum), so nobody else holds it and it can be updated in
    place. A buffer in the ready queue is ordered by ``node``'s sequence number, higher
    first, then by ``order`` (first come, first served). Made by ``_new_buffer``.
    """

    def is_owned(self, slot):
        return self.owned is not None and self.owned[slot]

    def set_owned(self, slot):
        if self.owned is None:
            self.owned = [False] * self.size
        self.owned[slot] = True

    def get(self, slot):
        if self.grads is None:
            if slot != 0:
                raise IndexError("input buffer slot out of range")
            return self.first
        return self.grads[slot]

    def put(self, slot, grad):
        if self.grads is None:
            if slot != 0:
                raise IndexError("input buffer slot out of range")
            self.first = grad
        else:
            self.grads[slot] = grad

    def slots(self):
        """The gradients as a new list."""
        return [self.first] if self.grads is None else list(self.grads)


@cython.cfunc
def _new_buffer(node: Node, size: cython.Py_ssize_t) -> InputBuffer:
    buffer: InputBuffer = InputBuffer.__new__(InputBuffer)
    buffer.node = node
    buffer.seq = node._seq  # copied: the heap compares it without reaching into the node
    buffer.size = size
    buffer.first = None
    buffer.grads = None if size == 1 else [None] * size
    buffer.owned = None
    buffer.order = 0
    return buffer


# Note [Ready queue]
# ------------------
# The ready queue is a binary heap of InputBuffers in a list, kept here rather than with
# heapq so that ordering compares two C fields instead of building a key tuple per push.
# A buffer that becomes ready while the queue is empty waits in ``GraphTask._next`` instead,
# out of the heap: in a chain every node is such a buffer, and the heap's list would
# otherwise grow to one element and shrink back (two reallocations) per node. ``_next`` is
# set only while the rest of the queue is empty, so it is always the queue's first element;
# the next push moves it into the queue.
#
# Beside the heap lies a run: a list of buffers each of which runs before the one under it
# (``_run[-1]`` runs first). A pushed buffer that runs before the run's last one goes on the
# run in O(1), any other into the heap; a pop takes the run's last or the heap's first,
# whichever runs first. The order of the nodes is that of the heap alone (the order is
# total: sequence number, then the order of the pushes), but a node with many outputs,
# whose successors were made in the order of its inputs (``stack``, ``cat``, ``unbind``,
# the roots of ``autograd.backward``), hands them to the queue in the reverse of their run
# order: each would climb the whole heap on its push and fall through it on its pop. The
# backward of ``stack`` of 10,000 products (bench/fanin.py) went from 11.7 to 9.6 ms.
@cython.cfunc
def _runs_before(a: InputBuffer, b: InputBuffer) -> cython.bint:
    return a.seq > b.seq or (a.seq == b.seq and a.order < b.order)


@cython.cfunc
def _heap_push(heap: list, item: InputBuffer):
    heap.append(item)
    pos: cython.Py_ssize_t = len(heap) - 1
    while pos > 0:
        parent: cython.Py_ssize_t = (pos - 1) >> 1
        above: InputBuffer = heap[parent]
        if not _runs_before(item, above):
            break
        heap[pos] = above
        pos = parent
    heap[pos] = item


@cython.cfunc
def _heap_pop(heap: list) -> InputBuffer:
    first: InputBuffer = heap[0]
    last: InputBuffer = heap.pop()
    n: cython.Py_ssize_t = len(heap)
    if n == 0:
        return first
    pos: cython.Py_ssize_t = 0
    while True:
        child: cython.Py_ssize_t = 2 * pos + 1
        if child >= n:
            break
        best: InputBuffer = heap[child]
        if child + 1 < n:
            right: InputBuffer = heap[child + 1]
            if _runs_before(right, best):
                child += 1
                best = right
        if not _runs_before(best, last):
            break
        heap[pos] = best
        pos = child
    heap[pos] = last
    return first


@cython.cfunc
def _queue_push(heap: list, run: list, item: InputBuffer):
    """Add ``item`` to the ready queue made of ``heap`` and ``run`` (Note [Ready queue])."""
    if not run or _runs_before(item, run[-1]):
        run.append(item)
    else:
        _heap_push(heap, item)


@cython.cfunc
def _queue_first(heap: list, run: list) -> InputBuffer:
    """The buffer of the queue made of ``heap`` and ``run`` that runs first; both not empty."""
    if not run:
        return heap[0]
    if heap and _runs_before(heap[0], run[-1]):
        return heap[0]
    return run[-1]


@cython.cfunc
def _queue_pop(heap: list, run: list) -> InputBuffer:
    """Remove and return the buffer that runs first; the queue is not empty."""
    if not run or (heap and _runs_before(heap[0], run[-1])):
        return _heap_pop(heap)
    return run.pop()


# Note [Recycled buffers]
# -----------------------
# Every node that runs needs an input buffer and a list of slots, and frees both when it has
# run; in a chain that is one allocation and one deallocation of each per node. Compiled,
# the task keeps the buffer of the node that just ran (its slots emptied at once, so no
# gradient lives longer) and fills it for the next node that needs a buffer of that size,
# unless reference counts show that someone else (an observer, a node's backward) holds the
# buffer or its list.

# Note [Counts on nodes]
# ----------------------
# A task's dependency counts and pending input buffers are per (task, node). Kept in dicts
# keyed by node they cost two lookups and a deletion per edge; compiled, they live on the
# node itself (Node._dep_count, Node._dep_buffer), stamped with the task's serial number
# (Node._dep_serial). Two tasks may be live on one graph at once (a backward started from a
# hook, a paused debug session and another backward, threads), so a task stamps the nodes
# only if none of them carries the stamp of another live task, and counts in dicts
# otherwise. The live serials are a small C array: a task is live from its stamping until it
# finishes, fails, is aborted or is freed. A stamp left by a dead task means nothing and is
# overwritten. The stamping walk runs in C without calling Python code, so no other thread
# runs in between. Interpreted, counts are always in dicts.
#
# Why ``_distribute`` keeps both paths: counts on nodes cannot serve two live tasks on one
# graph, and counts in dicts only would cost every backward. Measured on a 20,000-node chain
# (compiled, one thread, GC on): 17-18 ms with counts on nodes, 23-24 ms in dicts (a second,
# paused task holding the stamps forces the dicts); 24 ms against 30 ms with a fan-in at every
# node. tests/engine/test_counts_on_nodes.py runs both paths against torch's gradients, and
# tests/engine/test_reference_engine.py holds the event order to the reference engine's.
_MAX_LIVE = 32
_last_serial = 0
_live_count = 0  # live serials: _live_serials[:_live_count] (a C array, in _task.pxd)


def _is_live(serial: cython.longlong) -> cython.bint:
    i: cython.int
    for i in range(_live_count):
        if _live_serials[i] == serial:
            return True
    return False


def _make_live(serial: cython.longlong):
    global _live_count
    _live_serials[_live_count] = serial
    _live_count += 1


def _make_dead(serial: cython.longlong):
    global _live_count
    i: cython.int
    for i in range(_live_count):
        if _live_serials[i] == serial:
            _live_count -= 1
            _live_serials[i] = _live_serials[_live_count]
            return


@cython.cfunc
def _all_none(grads: list) -> cython.bint:
    for grad in grads:
        if grad is not None:
            return False
    return True


# Note [Gradients as arrays]
# --------------------------
# A fast rule (Note [Fast backward rules]) computes on numpy arrays, and the next node's fast
# rule reads arrays again: the Tensor the engine wrapped around each result in between was
# made for no one. In a wide fan-in (``stack(ys).sum()`` of 10,000 pieces) every piece's
# Tensor waits in the ready queue with its InputBuffer, and with the collector on those
# tracked objects cost the backward its young collections. So a node whose backward is its
# fast rule, run with nothing that looks at Tensors (no observer, no hooks on the node, no
# ``inputs=``/``autograd.grad`` pass, no anomaly mode, no ``create_graph``), takes and
# returns its gradients as arrays (``_takes_arrays``); an incoming Tensor passed through
# stays that Tensor. Buffers hold either; a second contribution to a slot is added as
# arrays with the bits of ``add`` (``_add_arrays``), or through the runtime's ``add`` for
# anything else. Every other node (AccumulateGrad, custom Functions, Python rules, a node
# with hooks or observed) gets Tensors: ``_tensor_slots`` wraps the arrays in its buffer
# first, in place, so what it sees is what it saw before (a leaf's gradient is still
# stolen or copied by the same reference counts), as do ``pending_buffer`` and
# ``expose_input_buffers``. One-slot buffers, nearly all of them, keep their gradient in a
# field instead of a one-element list. Together, a piece waiting in the ready queue went
# from three GC-tracked objects (Tensor, InputBuffer, list) to one.
@cython.cfunc
def _takes_arrays(node: Node) -> cython.bint:
    """Whether ``node`` runs its fast rule on arrays (Note [Gradients as arrays]); the task's
    conditions (observer, passes with ``inputs=``) are checked by the caller."""
    if not isinstance(node, OpNode):
        return False
    opnode: OpNode = node
    spec: OpSpec = opnode.op
    if spec.fast_backward is None or is_grad_enabled() or is_anomaly_enabled():
        return False
    extra = node._extra  # hooks live here (Note [Rare node fields])
    return extra is None or (extra.pre_hooks is None and extra.post_hooks is None
                             and extra.tensor_pre_hooks is None)


@cython.cfunc
def _data_of(grad):
    """The array of a gradient held as a Tensor or as an array."""
    if type(grad) is _ndarray:
        return grad
    tensor: TensorBase = grad
    return tensor._data


@cython.cfunc
def _as_tensor(grad):
    """A gradient as a Tensor: an array is wrapped, a Tensor or None stays."""
    return _wrap(grad) if type(grad) is _ndarray else grad


@cython.cfunc
def _wrap_arrays(buffer: InputBuffer):
    """Wrap the arrays in ``buffer`` in Tensors, in place."""
    if buffer.grads is None:
        buffer.first = _as_tensor(buffer.first)
        return
    grads: list = buffer.grads
    i: cython.Py_ssize_t
    for i in range(len(grads)):
        if type(grads[i]) is _ndarray:
            grads[i] = _wrap(grads[i])


@cython.cfunc
def _tensor_slots(buffer: InputBuffer) -> list:
    """The buffer's gradients as Tensors (``_wrap_arrays``), in the list the node runs with:
    the buffer's own list, or a new one for a one-slot buffer, whose gradient moves into it
    (so a leaf's gradient has the references Note [Stealing the gradient] counts)."""
    _wrap_arrays(buffer)
    if buffer.grads is None:
        grads = [buffer.first]
        buffer.first = None
        return grads
    return buffer.grads


# Note [Records the engine appends]
# ---------------------------------
# A recorder that defers its events (Note [Events when read] in gradviz/instrument/_recorder.py)
# turns each callback into one tuple appended to a list, and the Python call around the append
# was most of what the callback cost: about 1 us, some 550 times in a GPT step's backward. So
# while it defers, the recorder offers the engine an ``EventLog`` (its ``_engine_log``
# attribute, read at each event point, None otherwise), and the engine appends those records
# itself where the callback would do nothing else:
#
# * ``node_ready``;
# * ``buffer_added`` of a first contribution (``"stored"``: no sum to summarize now);
# * ``node_started`` and ``node_finished`` of a built-in op's node that runs no code the engine
#   does not control (``runs_outside_code``: no hooks of any kind, no saved-tensor hooks).
#   Its ``node_finished`` record holds the list its ``node_started`` record holds when the
#   node's gradients did not change in between.
#
# Every other event, and every event of any other node (AccumulateGrad, custom Functions),
# is the observer's call as before, so what the recorder decides (to stop deferring, to copy
# a leaf's ``.grad``) it still decides. The records are the recorder's layout, ``(builder,
# task number, node, clock, ...)``, with the builders and the number the log carries; the log
# also carries the recorder's budget of gradient bytes its records may hold
# (``bytes_left``, None for none), which the engine's ``node_finished`` records count down:
# one that would overdraw it is the observer's call, which then stops deferring. The recorder
# builds the same events from these records as from its own (the deferred-vs-eager tests in
# tests/instrument/test_lazy_summaries.py).
class EventLog:
    """Where the engine appends a deferring recorder's records (Note [Records the engine
    appends]): the recorder's list, its task number, its builders of node_ready,
    buffer_added, node_started and node_finished records, and its byte budget."""

    def __init__(self, records, number, ready, added, started, finished, bytes_left=None):
        self.records = records
        self.number = number
        self.ready = ready
        self.added = added
        self.started = started
        self.finished = finished
        self.bytes_left = bytes_left


@cython.cfunc
def _log_of(observer) -> EventLog:
    """The observer's ``_engine_log`` when it is an EventLog, else None."""
    log = getattr(observer, "_engine_log", None)
    return log if type(log) is EventLog else None


_DO_NOTHING = {name: getattr(Observer, name) for name in BACKWARD_CALLBACKS}


def _listens(observer) -> cython.bint:
    """Whether any backward callback of ``observer`` may do something: False for an
    ``Observer`` that overrides none of them, in its class or on itself (Note [Observer
    cost]); True for anything else, including an object that only looks like an observer."""
    if observer is None:
        return False
    if not isinstance(observer, Observer):
        return True
    own = getattr(observer, "__dict__", None)
    cls = type(observer)
    for name in BACKWARD_CALLBACKS:
        if getattr(cls, name, None) is not _DO_NOTHING[name] or (own and name in own):
            return True
    return False


@cython.ccall
def runs_outside_code(node) -> cython.bint:
    """Whether running ``node`` may run code the engine does not control: a backward that is
    not a built-in rule, hooks of any kind, saved-tensor unpack hooks (Note [Lazy summaries]
    in gradviz/instrument/_summary.py)."""
    if not isinstance(node, (OpNode, AccumulateGrad, GraphRoot)):
        return True
    base: Node = node
    extra = base._extra
    if extra is not None and (extra.pre_hooks or extra.post_hooks or extra.tensor_pre_hooks):
        return True
    if isinstance(node, AccumulateGrad):
        accumulate: AccumulateGrad = node
        variable: TensorBase = accumulate.variable
        return bool(variable._post_accumulate_hooks)
    if isinstance(node, OpNode):  # its saved tensors, as the recorder lists them
        op: OpNode = node
        if op._saved_output is not None and op._saved_output._has_hooks:
            return True
        if op._kept_inputs is not None:
            for value in op._kept_inputs:
                if isinstance(value, SavedTensor):
                    saved: SavedTensor = value
                    if saved._has_hooks:
                        return True
    return False


@cython.ccall
def same_items(first: list, second: list) -> cython.bint:
    """Whether the two lists hold the same objects (``is``, never ``==``: tensors)."""
    if len(first) != len(second):
        return False
    i: cython.Py_ssize_t
    for i in range(len(first)):
        if first[i] is not second[i]:
            return False
    return True


class GraphTask:
    """One backward pass, executed as a state machine: ``step()`` runs one node.

    Parameters
    ----------
    roots : list of (Node, int)
        The edges that receive the initial gradients.
    grads : list of tensors
        The initial gradients, one per root.
    keep_graph : bool
        ``retain_graph``: keep saved tensors after each node runs.
    create_graph : bool
        Run every backward under grad mode, so the gradients have a graph of their own.
    capture : list of (Node, int) or None
        For ``autograd.grad``: capture the gradient that reaches each edge, run only the
        nodes on a path to them, and leave ``.grad`` alone.
    accumulate_into : list of tensors or None
        For ``backward(inputs=...)``: accumulate only into these tensors' ``.grad`` (a non-leaf
        gets the gradient that reaches it; its own ``grad_fn`` runs only if needed otherwise).
    observer : Observer or None
        Receives this task's events (default: the process-wide default observer).
    made_grads : bool
        Every initial gradient was made for this pass (the ones of a scalar root), none is the
        caller's: nothing outside the engine holds them (an observer may then read them later,
        Note [Events when read] in gradviz/instrument/_recorder.py).
    """

    def __init__(self, roots, grads, keep_graph=False, create_graph=False, capture=None,
                 accumulate_into=None, observer=None, made_grads=False):
        self.keep_graph = bool(keep_graph or create_graph)
        self.create_graph = bool(create_graph)
        self.made_grads = bool(made_grads)
        self.observer = observer if observer is not None else default_observer()  # a property
        self.state = PAUSED
        self.error = None
        self.error_node = None
        self.current = None
        self._ready = []
        self._run = []
        self._next = None
        self._ready_counter = 0
        self._not_ready = {}
        self._dependencies = {}
        self._serial = 0
        self._stored = 0
        self._spare = None
        self._exec_info = None
        self._captures = None
        self.captured = None
        self._retains = None
        self._started_at = 0.0
        self._executed = 0
        self._exposed_to = None
        self._exposed_watch = None
        outer = current_graph_task()
        if (outer is not None and outer._exposed_to is not None
                and outer._exposed_to is outer.current):
            raise RuntimeError(
                f"backward() or autograd.grad() was called inside the backward of "
                f"{outer.current.name()} after it received a buffer from "
                "ctx.input_grad_buffers. A nested backward could update that buffer while "
                "it is in use; finish accumulating and return from backward first."
            )

        roots = list(roots)
        grads = list(grads)
        if len(roots) == 1:
            root_node, root_slot = roots[0]
            self.graph_root = root_node
            initial = _new_buffer(root_node, root_node.num_inputs if root_node.num_inputs else 1)
            initial.put(root_slot, grads[0])
        else:
            root_node = GraphRoot(roots, grads)
            root_slot = -1
            self.graph_root = root_node
            initial = _new_buffer(root_node, 0)
        self.roots = roots
        self._compute_dependencies(root_node)
        if capture is not None or accumulate_into is not None:
            self._init_exec_info(root_node, capture, accumulate_into)
        self._push_ready(initial)
        if self._listener is not None:
            self._listener.backward_started(self)
            self._listener.node_ready(self, root_node)

    @property
    def observer(self):
        """The observer this pass reports to (None: none). One that overrides no backward
        callback is told nothing (Note [Observer cost])."""
        return self._observer

    @observer.setter
    def observer(self, observer):
        self._observer = observer
        self._listener = observer if _listens(observer) else None

    # ---- set-up --------------------------------------------------------------------
    def _compute_dependencies(self, root):
        """Count, for each reachable node, the edges that point at it (iteratively).

        A node is pushed when it is first counted: the graph is acyclic and the root has no
        predecessor, so the counts themselves say which nodes were seen. Compiled, the counts
        are kept on the nodes when no other live task counts on them (Note [Counts on nodes]).
        """
        if cython.compiled and self._count_on_nodes(root):
            return
        dependencies: dict = self._dependencies
        stack: list = [root]
        node: Node
        i: cython.Py_ssize_t
        while stack:
            node = stack.pop()
            for i in range(node._edge_count):  # Note [Inline edges] (_engine.py)
                next_node = node._edge_node(i)
                if next_node is None:
                    continue
                count = dependencies.get(next_node)
                if count is None:
                    dependencies[next_node] = 1
                    stack.append(next_node)
                else:
                    dependencies[next_node] = count + 1

    def _count_on_nodes(self, root):
        """Note [Counts on nodes]: stamp every reachable node with this task's serial and its
        dependency count. False (and no stamp left) when another live task has stamped one of
        them, or too many tasks are live: then the counts go in dicts."""
        global _last_serial
        if _live_count >= _MAX_LIVE:
            return False
        _last_serial += 1
        serial: cython.longlong = _last_serial
        stack: list = [root]
        node: Node
        successor: Node
        i: cython.Py_ssize_t
        while stack:
            node = stack.pop()
            for i in range(node._edge_count):
                next_node = node._edge_node(i)
                if next_node is None:
                    continue
                successor = next_node
                if successor._dep_serial == serial:
                    successor._dep_count += 1
                    continue
                if successor._dep_serial != 0 and _is_live(successor._dep_serial):
                    self._unstamp(root, serial)
                    return False
                successor._dep_serial = serial
                successor._dep_count = 1
                successor._dep_buffer = None
                stack.append(successor)
        self._serial = serial
        _make_live(serial)
        return True

    def _unstamp(self, root, serial):
        """Forget ``serial``'s stamps and buffers on the nodes reachable from ``root``. Safe
        on a graph the collector is clearing (a node without edges is skipped)."""
        if not isinstance(root, Node):
            return
        stack: list = [root]
        node: Node
        successor: Node
        i: cython.Py_ssize_t
        while stack:
            node = stack.pop()
            # a node the collector cleared has no edge nodes left (None)
            for i in range(node._edge_count):
                next_node = node._edge_node(i)
                if not isinstance(next_node, Node):
                    continue
                successor = next_node
                if successor._dep_serial == serial:
                    successor._dep_serial = 0
                    successor._dep_count = 0
                    successor._dep_buffer = None
                    stack.append(successor)

    def _end_counts(self):
        """The task is over: its serial is no longer live, and buffers left on nodes (by an
        error or an abort) are dropped."""
        serial: cython.longlong = self._serial
        if serial == 0:
            return
        self._serial = 0
        _make_dead(serial)
        if self._stored:
            self._stored = 0
            self._unstamp(self.graph_root, serial)

    def _pending(self, node):
        """The input buffer of a node that has received some but not all of its gradients."""
        if self._serial == 0:
            return self._not_ready.get(node)
        if not isinstance(node, Node):
            return None
        counted: Node = node
        if counted._dep_serial != self._serial:
            return None
        return counted._dep_buffer

    def __dealloc__(self):
        # a task dropped before it ended (a paused debug session) must not stay live; when
        # the collector frees it, graph_root may already be cleared (then nothing is walked)
        if cython.compiled:
            self._end_counts()

    def _init_exec_info(self, root, capture, accumulate_into):
        """Mark the nodes on a path from the root to a captured or accumulated edge."""
        targets = {}
        self._captures = {}
        if capture is not None:
            self.captured = [None] * len(capture)
            for index, (node, slot) in enumerate(capture):
                self._captures.setdefault(node, []).append((slot, index))
                targets[node] = False  # reached, but not executed for capture alone
        if accumulate_into is not None:
            for tensor in accumulate_into:
                node, slot = gradient_edge(tensor)
                # PyTorch's backward(inputs=...) runs every input's node, a non-leaf's
                # grad_fn too (its formulas then compute nothing this pass does not follow)
                targets[node] = True
                if tensor.grad_fn is not None:
                    if self._retains is None:
                        self._retains = {}
                    self._retains.setdefault(node, []).append((slot, tensor))
        needed = {}
        # Iterative post-order: a node is needed if it is a target or any successor is.
        stack = [(root, iter(root.next_functions))]
        visited = {root}
        while stack:
            node, children = stack[-1]
            advanced = False
            for next_node, _ in children:
                if next_node is None:
                    continue
                if next_node not in visited:
                    visited.add(next_node)
                    stack.append((next_node, iter(next_node.next_functions)))
                    advanced = True
                    break
            if advanced:
                continue
            stack.pop()
            is_needed = targets.get(node, False)
            reaches = node in targets
            for next_node, _ in node.next_functions:
                if next_node is not None and needed.get(next_node, (False, False))[1]:
                    is_needed = True
                    reaches = True
            needed[node] = (is_needed, reaches)
        self._exec_info = {node: flags[0] for node, flags in needed.items() if flags[1]}

    # ---- inspection ----------------------------------------------------------------
    @property
    def state_name(self):
        return _STATE_NAMES[self.state]

    @property
    def done(self):
        return self.state >= FINISHED

    def peek(self):
        """The node that the next ``step()`` will run, or None."""
        if self.state >= FINISHED:
            return None
        if self._next is not None:
            return self._next.node
        if not self._ready and not self._run:
            return None
        return _queue_first(self._ready, self._run).node

    def _ready_buffers(self):
        """The ready queue's buffers, in no particular order (Note [Ready queue])."""
        return self._ready + self._run if self._next is None else [self._next]

    def ready_nodes(self):
        """Nodes in the ready queue, in the order they will run."""
        ordered = sorted(self._ready_buffers(),
                         key=lambda buffer: (-buffer.node._seq, buffer.order))
        return [buffer.node for buffer in ordered]

    def pending_buffer(self, node):
        """The gradients collected so far for a node that has not run (a copy of the list)."""
        buffer = self._pending(node)
        if buffer is None:
            for item in self._ready_buffers():
                if item.node is node:
                    buffer = item
        if buffer is None:
            return None
        _wrap_arrays(buffer)  # Note [Gradients as arrays]: what a reader sees is a Tensor
        return buffer.slots()

    def expose_input_buffers(self, node):
        """Offer the running custom node the pending input buffers of its successors.

        Returns one ``(tensor or None, reason)`` per edge of ``node.next_functions``: the
        engine's current sum of the gradients that already reached the input on that edge,
        which the node may add its own contribution to in place (and then return ``None``
        for it). The rules of ``ctx.input_grad_buffers`` (docs/function_contract.md):

        * only for ``node`` while it is this task's running node;
        * never under ``create_graph``, anomaly mode, or when ``node`` has post-hooks (they
          must see every gradient the node produces); nor on an edge whose input another
          node with post-hooks feeds (its hooks saw that contribution: ``_hooked_producer``);
        * an edge gets a buffer only if a contribution is already pending there. A sum the
          engine made is exposed as is; a single stored contribution belongs to its producer
          (it may be aliased), so it is first copied into an engine-owned buffer;
        * an input that appears on several edges is offered on its first edge only.

        Reports the decision through ``observer.buffers_exposed(task, node, entries)`` with
        entries ``{"edge", "exposed", "reason"}``. After a buffer is handed out, starting
        another backward before ``node`` returns raises (see ``end_input_buffers``).
        """
        if node is not self.current:
            raise RuntimeError(
                f"input buffers can only be exposed to the node that is running "
                f"({node.name()} is not)"
            )
        edges = node.next_functions
        blocked = None
        if self.create_graph:
            blocked = "unavailable with create_graph=True"
        elif is_anomaly_enabled():
            blocked = "unavailable in anomaly mode"
        elif node._post_hooks is not None and len(node._post_hooks) > 0:
            blocked = "unavailable: the node has post-hooks"
        results = []
        seen = set()
        exposed_any = False
        for next_node, slot in edges:
            buffer = None
            if blocked is not None:
                reason = blocked
            elif next_node is None:
                reason = "the input does not require grad"
            elif (next_node, slot) in seen:
                reason = "the input appears more than once; offered on its first use only"
            else:
                seen.add((next_node, slot))
                pending = self._pending(next_node)
                if pending is not None:
                    _wrap_arrays(pending)  # Note [Gradients as arrays]
                grad = None if pending is None else pending.get(slot)
                producer = None if grad is None else self._hooked_producer(next_node, slot, node)
                if grad is None:
                    reason = "no earlier contribution"
                elif producer is not None:
                    reason = f"unavailable: the producing node {producer.name()} has post-hooks"
                elif grad.grad_fn is not None or grad._requires_grad:
                    reason = "the pending gradient is part of a graph"
                elif pending.is_owned(slot):
                    buffer = grad
                    reason = "engine-owned sum"
                else:
                    buffer = _rt.detach(_rt.clone(grad))
                    pending.put(slot, buffer)
                    pending.set_owned(slot)
                    reason = "stored contribution copied into an engine-owned buffer"
            if buffer is not None:
                exposed_any = True
            results.append((buffer, reason))
        if exposed_any:
            self._exposed_to = node
            if self._listener is not None:
                # Note [Writes into exposed buffers]
                watch = []
                for (next_node, slot), (buffer, _) in zip(edges, results):
                    if buffer is not None:
                        exposed: TensorBase = buffer
                        watch.append((next_node, slot, buffer, exposed._version_counter.value))
                self._exposed_watch = watch
        if self._listener is not None:
            self._listener.buffers_exposed(self, node, [
                {"edge": index, "exposed": buffer is not None, "reason": reason}
                for index, (buffer, reason) in enumerate(results)])
        return results

    def _hooked_producer(self, target, slot, running):
        """A node of this graph, other than ``running``, with post-hooks and an edge into
        ``(target, slot)``, or None. Post-hooks see the gradients their node produced, so a
        buffer holding such a contribution must not be changed in place. Walks the graph
        (only when a custom backward asks for its input buffers)."""
        stack = [self.graph_root]
        seen = {id(self.graph_root)}
        while stack:
            current = stack.pop()
            hooked = (current is not running and current._post_hooks is not None
                      and len(current._post_hooks) > 0)
            for next_node, next_slot in current.next_functions:
                if next_node is None:
                    continue
                if hooked and next_node is target and next_slot == slot:
                    return current
                if id(next_node) not in seen:
                    seen.add(id(next_node))
                    stack.append(next_node)
        return None

    def end_input_buffers(self, node):
        """``node``'s backward returned: buffers it received are no longer in use."""
        if self._exposed_to is node:
            self._exposed_to = None
            watch, self._exposed_watch = self._exposed_watch, None
            if watch is not None and self._listener is not None:
                for next_node, slot, buffer, version in watch:
                    written: TensorBase = buffer
                    if written._version_counter.value != version:
                        self._listener.buffer_added(self, next_node, slot, node,
                                                   "written_by_backward", None, buffer)

    # Note [Writes into exposed buffers]
    # ----------------------------------
    # A custom backward that read ctx.input_grad_buffers may add its contribution into a
    # successor's buffer in place and return None for that input; no gradient then passes
    # through _distribute, yet the buffer's sum changed. So that what an observer shows stays
    # the buffer's real sum, the engine notes each exposed buffer's version and, when the
    # backward returns, reports every buffer whose version moved as a ``buffer_added`` with
    # how="written_by_backward" (no separate contribution: only the new sum is known).
    # Only with an observer attached; the cost is one tuple per exposed buffer.

    def dependencies(self):
        """Remaining dependency counts of the nodes that have not become ready."""
        if self._serial == 0:
            return dict(self._dependencies)
        counts = {}
        stack = [self.graph_root]
        node: Node
        while stack:
            node = stack.pop()
            for next_node, _ in node.next_functions:
                if next_node is None or next_node in counts:
                    continue
                counted: Node = next_node
                if counted._dep_serial == self._serial and counted._dep_count > 0:
                    counts[next_node] = counted._dep_count
                stack.append(next_node)
        return counts

    def is_needed(self, node):
        if self._exec_info is None:
            return True
        return self._exec_info.get(node, False)

    # ---- execution -----------------------------------------------------------------
    def run(self):
        """Run to the end and return the captured gradients (``autograd.grad``) or None.

        Grad mode and the running task are set once for the whole run rather than around
        every node (``step`` does that): after each node they are only checked, and put back
        if the node's own code changed them, as PyTorch resets them for every node.
        """
        token = None
        errstate = None
        if _errstate_var is None:
            errstate = numpy.errstate(all="ignore")
            errstate.__enter__()
        else:
            token = _errstate_var.set(_errstate_quiet)  # Note [Quiet backward]
        previous = set_grad_enabled_flag(self.create_graph)
        outer_task = set_current_graph_task(self)
        handler = _cache_enter()  # Note [Array cache] in _ops.py
        try:
            while self._step(True) is not None:
                pass
        finally:
            _cache_exit(handler)
            set_grad_enabled_flag(previous)
            set_current_graph_task(outer_task)
            if token is not None:
                _errstate_var.reset(token)
            else:
                errstate.__exit__(None, None, None)
        self._finish()
        return self.captured

    def abort(self):
        """Stop the task; the graph is left as it is (saved tensors freed only where nodes ran)."""
        if self.state < FINISHED:
            self.state = ABORTED
            self._ready = []
            self._run = []
            self._next = None
            self._not_ready = {}
            self._end_counts()

    def step(self):
        """Run the next ready node and return it; None when the task is over."""
        handler = _cache_enter()  # Note [Array cache] in _ops.py
        try:
            if _errstate_var is None:
                with numpy.errstate(all="ignore"):
                    return self._step()
            token = _errstate_var.set(_errstate_quiet)  # Note [Quiet backward]
            try:
                return self._step()
            finally:
                _errstate_var.reset(token)
        finally:
            _cache_exit(handler)

    def _step(self, managed=False):
        """Run the next ready node. ``managed``: ``run`` has set grad mode and the running
        task for the whole run, and finishes the task itself."""
        if self.state >= FINISHED:
            return None
        buffer: InputBuffer = self._next
        if buffer is not None:
            self._next = None
        elif self._ready or self._run:
            buffer = _queue_pop(self._ready, self._run)
        else:
            if not managed:
                self._finish()
            return None
        if self._executed == 0:
            self._started_at = time.perf_counter()
        node: Node = buffer.node
        self.current = node
        self.state = RUNNING
        # PyTorch runs the whole node (hooks, backward, accumulation) in the graph task's
        # grad mode, which is create_graph; ``run`` has set it (and the running task) already
        if not managed:
            previous = set_grad_enabled_flag(self.create_graph)
            outer_task = set_current_graph_task(self)
        try:
            self._execute(node, buffer)
        except BaseException as exc:
            self._fail(node, exc)
            raise
        finally:
            if not managed:
                set_grad_enabled_flag(previous)
                set_current_graph_task(outer_task)
            self.current = None
        if managed:  # the node's code may have left these changed: torch resets them per node
            if is_grad_enabled() != self.create_graph:
                set_grad_enabled_flag(self.create_graph)
            if current_graph_task() is not self:
                set_current_graph_task(self)
        if cython.compiled:
            self._recycle(buffer)
        self._executed += 1
        if self._next is not None or self._ready or self._run:
            self.state = PAUSED
        elif not managed:
            self._finish()
        return node

    def _fail(self, node, exc):
        self.state = FAILED
        self.error = exc
        self.error_node = node
        self._ready = []
        self._run = []
        self._next = None
        self._not_ready = {}
        self._end_counts()
        if self._listener is not None:
            self._listener.error(self, node, exc)
        if is_anomaly_enabled() and isinstance(exc, Exception):  # Note [Anomaly mode]
            report_anomaly(node, exc)

    def _finish(self):
        if self.state >= FINISHED:
            return
        self.state = FINISHED
        self._end_counts()
        if self._listener is not None:
            self._listener.backward_finished(self, time.perf_counter() - self._started_at)

    def _recycle(self, buffer):
        """Keep the buffer of the node that just ran as the next one to fill, emptied, when
        nobody else holds it or its list (Note [Recycled buffers])."""
        if self._spare is not None or Py_REFCNT(buffer) != 1:  # _step's local only
            return
        spent: InputBuffer = buffer
        if spent.grads is None:
            spent.first = None
        else:
            grads: list = spent.grads
            if Py_REFCNT(grads) != 2:  # the buffer's and ours
                return
            i: cython.Py_ssize_t
            for i in range(len(grads)):
                grads[i] = None
        spent.node = None
        spent.owned = None
        self._spare = spent

    def _buffer_for(self, node, size):
        """An empty input buffer of ``size`` slots for ``node``: the spare one if it fits."""
        spare: InputBuffer = self._spare
        if spare is not None and spare.size == size:
            self._spare = None
            spare.node = node
            spare.seq = node._seq
            spare.order = 0
            return spare
        return _new_buffer(node, size)

    def _push_ready(self, buffer):
        """Add a buffer to the ready queue (Note [Ready queue])."""
        self._ready_counter += 1
        buffer.order = self._ready_counter
        if self._next is not None:
            _queue_push(self._ready, self._run, self._next)
            self._next = None
        elif not self._ready and not self._run:
            self._next = buffer
            return
        _queue_push(self._ready, self._run, buffer)

    def _execute(self, node, buffer):
        observer = self._listener
        ready: InputBuffer = buffer
        if observer is None and self._exec_info is None and _takes_arrays(node):
            self._execute_arrays(node, ready)  # Note [Gradients as arrays]
            return
        grads: list = _tensor_slots(ready)
        # A sum the engine made itself can become the leaf's .grad without a copy.
        owned_grad = grads[0] if (grads and ready.is_owned(0)) else None
        started = time.perf_counter() if observer is not None else 0.0
        log: EventLog = None  # Note [Records the engine appends]: this node's, if it logs
        arrived: list = None
        if observer is not None:
            log = _log_of(observer)
            if log is not None and isinstance(node, OpNode) and not runs_outside_code(node):
                arrived = list(grads)
                log.records.append((log.started, log.number, node, started, arrived, arrived))
            else:
                log = None
                observer.node_started(self, node, list(grads))

        # 1. tensor pre-hooks, then node pre-hooks. autograd.grad's captures: as in
        # PyTorch, a node that runs gives the gradient as it arrived (its tensor hooks run
        # later, in call_function), one that does not gives it after the tensor hooks
        runs: cython.bint = self._exec_info is None or self._exec_info.get(node, False)
        if self._captures is not None and runs:
            self._capture(node, grads)
        # the hooks live in node._extra, None on most nodes (Note [Rare node fields])
        if node._extra is not None and node._extra.tensor_pre_hooks is not None:
            self._run_tensor_pre_hooks(node, grads)
        if self._captures is not None and not runs:
            self._capture(node, grads)
        if self._retains is not None:
            retains = self._retains.get(node)
            if retains is not None:
                for slot, tensor in retains:
                    retained: TensorBase = tensor
                    if not retained._retains_grad:  # else its retain_grad hook stores it
                        self._accumulate_into(tensor, grads[slot], None)
        if not runs:
            if observer is not None:
                observer.node_finished(self, node, list(grads), [], time.perf_counter() - started)
            return
        if node._extra is not None and node._extra.pre_hooks is not None:
            grads = self._run_pre_hooks(node, grads)

        if isinstance(node, AccumulateGrad):
            self._accumulate(node, grads, owned_grad)
            outputs = []
            # PyTorch passes grad_inputs == ()
            if node._extra is not None and node._extra.post_hooks is not None:
                self._run_post_hooks(node, outputs, grads)
        else:
            # A built-in node that received no gradient at all passes None on without running,
            # like PyTorch's generated backward functions; a custom Function still runs.
            skip: cython.bint = (_all_none(grads) and not isinstance(node, GraphRoot)
                                 and node._kind() == "builtin")
            # post-hooks see the gradients before materialization (None stays None), as in
            # PyTorch, where nodes materialize inside their backward
            hook_grads = grads
            # 2. zero-materialization
            if not skip and node._materializes_grads():
                grads = self._materialize(node, grads)
            # 3. backward (grad mode is already create_graph: see _step)
            if skip:
                outputs = [None] * node._edge_count
            else:
                outputs = node._apply_grads(grads)
            # 4. validation
            outputs = self._validate(node, outputs)
            # observed too: what a debugger shows is what torch computes (None there)
            if (((node._extra is not None and node._extra.post_hooks is not None)
                 or self._exec_info is not None
                 or observer is not None) and node._kind() == "builtin"):
                self._drop_unneeded(node, outputs)
            # 5. post-hooks
            if node._extra is not None and node._extra.post_hooks is not None:
                outputs = self._run_post_hooks(node, outputs, hook_grads)

        # 6. release
        if not self.keep_graph and not node._released:
            if observer is not None:
                count, nbytes = node.saved_tensor_count()
                node.release_variables()
                if count:
                    observer.saved_released(self, node, count, nbytes)
            else:
                node.release_variables()
        if outputs and is_anomaly_enabled() and is_anomaly_check_nan_enabled():
            check_nan(node, outputs)  # Note [Anomaly mode]
        if observer is not None:
            if log is None or not self._log_finished(node, arrived, grads, outputs, started):
                observer.node_finished(self, node, list(grads), list(outputs),
                                       time.perf_counter() - started)
        # 7. hand the results to the successors
        if outputs:
            self._distribute(node, outputs)

    def _log_finished(self, node, arrived, grads, outputs, started) -> cython.bint:
        """Append ``node``'s node_finished record to the observer's log, if it still logs
        and its byte budget allows (Note [Records the engine appends]); False if not."""
        log: EventLog = _log_of(self._listener)
        if log is None:
            return False
        grads_out = list(outputs)
        if log.bytes_left is not None:
            left = log.bytes_left
            for grad in grads_out:
                if grad is not None:
                    tensor: TensorBase = grad
                    left -= tensor._data.nbytes
            if left < 0:
                return False  # the observer's node_finished counts it and stops deferring
            log.bytes_left = left
        now = time.perf_counter()
        grads_in = arrived if same_items(arrived, grads) else list(grads)
        log.records.append((log.finished, log.number, node, now, grads_in, grads_out,
                            now - started, grads_in))
        return True

    def _execute_arrays(self, node, buffer):
        """``_execute`` of a node that runs its fast rule on arrays, when nothing observes it
        (Note [Gradients as arrays]): steps 2, 3, 4, 6 and 7 of Note [Engine order]."""
        opnode: OpNode = node
        ready: InputBuffer = buffer
        outputs: list
        if ready.grads is None:
            grad = ready.first
            ready.first = None
            if grad is None:  # a built-in node that received no gradient passes None on
                outputs = [None] * opnode._edge_count
            else:
                outputs = opnode._fast_one(grad, True)
        else:
            grads: list = ready.grads
            if _all_none(grads):
                outputs = [None] * opnode._edge_count
            else:
                if opnode._materializes_grads():
                    grads = self._materialize(node, grads)
                outputs = opnode._apply_fast(grads, True)
        count: cython.Py_ssize_t = opnode._edge_count
        if len(outputs) != count:
            self._validate(node, outputs, True)  # raises PyTorch's error
        # _validate and _distribute in one pass over the edges: nothing observes this node,
        # so handing a checked gradient on before checking the next one changes nothing
        # anybody sees, and a built-in rule's list is new (its items are replaced in place)
        index: cython.Py_ssize_t
        for index in range(count):
            next_node = opnode._edge_node(index)
            if next_node is None:
                continue
            slot: cython.Py_ssize_t = opnode._edge_nr(index)
            grad = outputs[index]
            if grad is not None:
                grad = self._conform(node, index, grad, next_node, slot, True)
            self._send(node, next_node, slot, grad, None)
        if not self.keep_graph and not opnode._released:
            opnode.release_variables()

    def _capture(self, node, grads):
        captures = self._captures.get(node)
        if captures is not None:
            for slot, index in captures:
                self.captured[index] = grads[slot]

    def _drop_unneeded(self, node, outputs: list):
        """None for each edge this pass does not follow: PyTorch's built-in formulas compute
        only the outputs whose next node exists and the pass executes
        (``task_should_compute_output``), so that is what the post-hooks see; nothing else
        reads those outputs. Custom Functions keep what backward returned."""
        counted: Node = node
        exec_info = self._exec_info
        index: cython.Py_ssize_t
        for index in range(counted._edge_count):
            next_node = counted._edge_node(index)
            if next_node is None or (exec_info is not None and next_node not in exec_info):
                outputs[index] = None

    def _run_tensor_pre_hooks(self, node, grads):
        observer = self._listener
        for slot, hooks in list(node._tensor_pre_hooks.items()):
            for hook in list(hooks):
                before = grads[slot]
                # Note [Observed values]: a hook may change the gradient in place
                seen = _snapshot(before) if observer is not None else None
                result = hook(before)
                if result is not None:
                    _check_hook_value(hook, before, result)
                    grads[slot] = result
                if observer is not None:
                    observer.prehook(self, node, hook, slot, seen, grads[slot],
                                     result is not None)

    def _run_pre_hooks(self, node, grads):
        observer = self._listener
        for hook in list(node._pre_hooks):
            seen = _snapshots(grads) if observer is not None else None
            result = hook(tuple(grads))
            if result is not None:
                _check_hook_values(hook, grads, result)
                grads = list(result)
            if observer is not None:
                observer.prehook(self, node, hook, -1, seen, list(grads), result is not None)
        return grads

    def _run_post_hooks(self, node, outputs, grads):
        observer = self._listener
        for hook in list(node._post_hooks):
            seen = _snapshots(outputs) if observer is not None else None
            result = hook(tuple(outputs), tuple(grads))
            replaced = result is not None
            if replaced:
                _check_hook_values(hook, outputs, result)
                outputs = list(result)
            if observer is not None:
                observer.posthook(self, node, hook, list(outputs), list(grads), replaced, seen)
        return outputs

    def _materialize(self, node, grads):
        slots = None
        metas: tuple = node._input_metadata
        slot: cython.Py_ssize_t
        for slot in range(len(grads)):
            if grads[slot] is None and slot < len(metas):
                meta = metas[slot]
                if meta is None or meta.dtype is None:
                    continue  # no tensor (or no fixed dtype) to build zeros from
                if slots is None:
                    grads = list(grads)
                    slots = []
                grads[slot] = _rt.zeros(meta.shape, meta.dtype)
                slots.append(slot)
        if slots is not None and self._listener is not None:
            self._listener.grads_materialized(self, node, slots)
        return grads

    def _validate(self, node, outputs, arrays=False):
        """Check arity; reduce shapes and cast dtypes to what each successor expects.

        Returns a new list: ``outputs`` may belong to the node's backward (a custom Function
        may keep what it returned), so it is never changed. With ``arrays``, the gradients of
        a fast rule run on arrays may be arrays (Note [Gradients as arrays]); one that is
        reduced or cast becomes a Tensor.
        """
        counted: Node = node
        count: cython.Py_ssize_t = counted._edge_count
        result: list
        if type(outputs) is list and isinstance(node, OpNode):
            result = outputs  # a built-in rule's list is new and nobody else holds it
        elif isinstance(outputs, (list, tuple)):
            result = list(outputs)
        else:
            result = [outputs]
        if len(result) != count:
            raise RuntimeError(
                f"function {node.name()} returned an incorrect number of gradients "
                f"(expected {count}, got {len(result)})"
            )
        index: cython.Py_ssize_t
        for index in range(len(result)):
            grad = result[index]
            if grad is None:
                continue
            next_node = counted._edge_node(index)
            if next_node is None:
                continue
            result[index] = self._conform(node, index, grad, next_node,
                                          counted._edge_nr(index), arrays)
        return result

    def _conform(self, node, index, grad, successor, slot, arrays):
        """Gradient ``index`` of ``node`` (not None), reduced to the shape and cast to the
        dtype that input ``slot`` of ``successor`` expects (a step of ``_validate``)."""
        if arrays and type(grad) is _ndarray:
            data = grad
        elif not isinstance(grad, TensorBase):
            raise TypeError(
                f"function {node.name()} returned a {type(grad).__name__} as gradient "
                f"{index}; expected a Tensor or None"
            )
        else:
            tensor: TensorBase = grad
            data = tensor._data
        metas: tuple = successor._input_metadata
        meta: InputMeta = metas[slot]
        if not _has_shape(data, meta.shape):
            shape = data.shape
            if not _expandable(meta.shape, shape):
                raise RuntimeError(
                    f"Function {node.name()} returned an invalid gradient at index {index} - "
                    f"got {list(shape)} but expected shape compatible with {list(meta.shape)}"
                )
            grad = _rt.sum_to(_as_tensor(grad), meta.shape)
            tensor = grad
            data = tensor._data
            if self._listener is not None:
                self._listener.grad_reduced(self, node, index, shape, meta.shape)
        # numpy dtypes of the built-in types are singletons: identity first, then ==
        if meta.np_dtype is not None:
            dtype = _dtype_of(data)
            if dtype is not meta.np_dtype and dtype != meta.np_dtype:
                grad = _as_tensor(grad)
                from_dtype = grad.dtype
                grad = _rt.cast(grad, meta.dtype)
                if self._listener is not None:
                    self._listener.grad_cast(self, node, index, from_dtype, meta.dtype)
        return grad

    def _distribute(self, node, outputs):
        """Hand each gradient in ``outputs`` to the node its edge leads to."""
        observer = self._listener
        counted: Node = node
        index: cython.Py_ssize_t
        for index in range(counted._edge_count):
            next_node = counted._edge_node(index)
            if next_node is None:
                continue
            self._send(node, next_node, counted._edge_nr(index), outputs[index], observer)

    def _send(self, node, successor, slot, grad, observer):
        """Count the edge from ``node`` to input ``slot`` of ``successor`` as done, add
        ``grad`` (None: nothing) to its input buffer and queue it once its last edge is done;
        ``observer`` is the task's listener, told of both (Note [Engine order], step 7)."""
        log: EventLog
        next_node = successor
        remaining: cython.Py_ssize_t
        if self._serial != 0:  # Note [Counts on nodes]
            if successor._dep_serial != self._serial:
                raise RuntimeError(f"dependency not found for {successor.name()}")
            remaining = successor._dep_count - 1
            successor._dep_count = remaining
            buffer = successor._dep_buffer
            if buffer is None:
                if self._exec_info is not None and next_node not in self._exec_info:
                    return
                buffer = self._buffer_for(successor, len(successor._input_metadata))
                if remaining != 0:
                    successor._dep_buffer = buffer
                    self._stored += 1
            elif remaining == 0:
                successor._dep_buffer = None
                self._stored -= 1
        else:
            dependencies: dict = self._dependencies
            not_ready: dict = self._not_ready
            count = dependencies.get(next_node)
            if count is None:
                raise RuntimeError(f"dependency not found for {successor.name()}")
            remaining = count
            remaining -= 1
            if remaining == 0:
                del dependencies[next_node]
            else:
                dependencies[next_node] = remaining
            buffer = not_ready.get(next_node)
            if buffer is None:
                if self._exec_info is not None and next_node not in self._exec_info:
                    return
                buffer = _new_buffer(successor, len(successor._input_metadata))
                if remaining != 0:
                    not_ready[next_node] = buffer
            elif remaining == 0:
                del not_ready[next_node]
        if grad is not None:
            how = self._add_to_buffer(buffer, slot, grad)
            if observer is not None:
                log = _log_of(observer)  # Note [Records the engine appends]
                if log is not None and how == "stored":
                    log.records.append((log.added, log.number, next_node, time.perf_counter(),
                                        slot, node, how, grad, None))
                else:
                    observer.buffer_added(self, next_node, slot, node, how, grad,
                                          buffer.get(slot))
        if remaining == 0:
            self._push_ready(buffer)
            if observer is not None:
                log = _log_of(observer)
                if log is not None:
                    log.records.append((log.ready, log.number, next_node,
                                        time.perf_counter()))
                else:
                    observer.node_ready(self, next_node)

    def _add_to_buffer(self, buffer, slot, grad):
        """Add ``grad`` to ``buffer``'s slot; grad mode is the task's (create_graph) here.
        Either may be an array (Note [Gradients as arrays])."""
        ready: InputBuffer = buffer
        old = ready.get(slot)
        if old is None:
            ready.put(slot, grad)
            return "stored"
        if not self.create_graph and ready.is_owned(slot):
            _add_inplace(old, grad)
            return "accumulated_in_place"
        if type(old) is _ndarray or type(grad) is _ndarray:
            total = _array_sum(old, grad)
        else:
            total = _rt.add(old, grad)
        ready.put(slot, total)
        ready.set_owned(slot)
        return "accumulated_out_of_place"

    def _accumulate(self, node, grads, owned_grad):
        """AccumulateGrad: add the completed gradient to the leaf's ``.grad``."""
        grad = grads[0] if grads else None
        if grad is None:
            return
        accumulate: AccumulateGrad = node
        variable = accumulate.variable
        leaf: TensorBase = variable  # the C slot under Tensor.grad: no property, no checks
        before = leaf.grad
        # Note [Observed values]: the update below is usually in place, into ``before``
        seen = _snapshot(before) if self._listener is not None else None
        if (before is None and not self.create_graph and grad is not owned_grad
                and _stealable(grad) and leaf._data.flags.c_contiguous):
            leaf.grad = grad  # Note [Stealing the gradient]
        else:
            self._accumulate_into(variable, grad, owned_grad)
        hooks = variable._post_accumulate_hooks
        if hooks is not None:
            for hook in list(hooks):
                hook(variable)
        if self._listener is not None:
            self._listener.grad_accumulated(self, node, variable, seen, leaf.grad)

    def _accumulate_into(self, variable, grad, owned_grad):
        """``variable.grad += grad`` the way AccumulateGrad does it (in place unless
        create_graph); grad mode is the task's (create_graph) here."""
        if grad is None:
            return
        leaf: TensorBase = variable
        before = leaf.grad
        if before is None:
            if self.create_graph:
                leaf.grad = _rt.clone(grad)
                return
            laid_out = _copy_in_layout_of(leaf, grad)
            if laid_out is not None:
                leaf.grad = laid_out
            elif grad is owned_grad:
                leaf.grad = grad
            else:
                # grad mode is off (no create_graph): a row-major copy of the array, what
                # clone(memory_format=contiguous_format) makes, without an op's dispatch
                grad_tensor: TensorBase = grad
                leaf.grad = _rt.make(numpy.array(grad_tensor._data, order="C"))
        elif self.create_graph:
            leaf.grad = _rt.add(before, grad)
        else:
            _add_inplace(before, grad)


# Note [Stealing the gradient]
# ---------------------------
# A leaf whose ``.grad`` is None gets a copy of the gradient that reached it, unless nothing
# else can see that gradient: then the tensor itself becomes ``.grad`` (PyTorch's
# AccumulateGrad steals a gradient whose use count is 1). Here "nothing else" is read off
# reference counts: the Tensor is held only by the input buffer's list and the engine's
# local (2), its array only by the Tensor (plus our local), and the array is C-contiguous,
# writeable (``.grad`` is summed into in place later) and no view, or the only view of an
# array it covers whole. A hook that kept the
# gradient, a user's upstream tensor passed through, or the same tensor bound for another
# leaf adds a reference, and the gradient is copied as before. Saves a copy of every weight's
# gradient per training step. Interpreted, reference counts differ, so it never steals.
@cython.cfunc
def _stealable(grad) -> cython.bint:
    if not cython.compiled:
        return False
    if Py_REFCNT(grad) != 2:  # the input buffer's list and the caller's local
        return False
    tensor: TensorBase = grad
    if (tensor.grad_fn is not None or tensor._requires_grad or tensor._base is not None
            or tensor._hooks is not None or tensor._post_accumulate_hooks is not None
            or tensor._retains_grad):
        return False
    data = tensor._data
    if Py_REFCNT(data) != 2 or type(data) is not _ndarray:  # the Tensor's and ours
        return False
    flags = data.flags
    if not (flags.c_contiguous and flags.writeable):
        return False
    if data.size == 0:  # numpy calls it row-major whatever its strides: _empty_in_layout_of
        return False
    base = data.base
    # a view is fine when it is the only view of an array it covers whole (the transposed
    # product the row-major matmul rule returns: see gradviz.ops._linalg)
    return base is None or (type(base) is _ndarray and Py_REFCNT(base) == 2
                            and base.base is None and base.size == data.size)


# Note [Observed values]
# ----------------------
# An observer is told what a value *was* at its event: a hook's ``before``, a leaf's ``.grad``
# before AccumulateGrad. The engine then changes those tensors in place (``.grad`` += grad;
# a hook may do ``grad.mul_(10)``), so a reference would show the later value. With an
# observer attached, the engine hands over a copy taken at that moment (``_snapshot``); the
# copy costs one pass over a gradient per hook run or per accumulation into an existing
# ``.grad``, and nothing when no one observes. Values the engine never changes afterwards
# (a node's incoming and outgoing gradients, a buffer's sum right after it was added to) are
# passed as they are: the observer summarizes them during its callback.


def _snapshot(tensor):
    """A detached copy of ``tensor`` (None stays None); Note [Observed values]."""
    if tensor is None:
        return None
    source: TensorBase = tensor
    return _rt.make(source._data.copy())


def _snapshots(tensors) -> list:
    return [_snapshot(t) for t in tensors]


def _copy_in_layout_of(leaf: TensorBase, grad: TensorBase):
    """A first ``.grad`` for a leaf that is dense but not row-major (a transposed weight):
    a copy of ``grad`` with the leaf's strides, as PyTorch's ``clone_obey_contract`` makes
    it; None for a row-major leaf (the usual case) or one with gaps or overlaps, whose
    ``.grad`` is row-major."""
    data = leaf._data
    if data.size == 0:  # numpy calls every array of no elements row-major
        return _empty_in_layout_of(data, grad._data)
    if data.flags.c_contiguous or not _dense(data):
        return None
    grad_data = grad._data
    out = numpy.empty_like(data, dtype=grad_data.dtype)  # order "K": the leaf's layout
    out[...] = grad_data
    return _rt.make(out)


def _empty_in_layout_of(data, grad_data):
    """A first ``.grad`` of no elements for a leaf of no elements (``data``), as PyTorch
    decides it, counting every empty tensor as dense (Note [Empty tensors' strides] in
    _ops.py): None (``grad`` as it is) when ``grad`` has the leaf's strides (those of dims of
    size 1 aside, unless 0: PyTorch's obeys_layout_contract), else the leaf's strides."""
    itemsize = data.itemsize
    steps = [stride // itemsize for stride in data.strides]
    size = grad_data.itemsize
    if all((grad_stride == step * size) if n != 1 else grad_stride != 0
           for grad_stride, step, n in zip(grad_data.strides, steps, data.shape)):
        return None
    strides = tuple([step * size for step in steps])
    return make_tensor_as_laid_out(numpy.lib.stride_tricks.as_strided(grad_data, data.shape,
                                                                      strides))


def _dense(data) -> cython.bint:
    """Whether the array's elements fill its memory exactly once (PyTorch's
    is_non_overlapping_and_dense), whatever the order of its dimensions."""
    expected = data.itemsize
    for stride, size in sorted((abs(st), n) for st, n in zip(data.strides, data.shape) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


@cython.cfunc
def _add_inplace(target, grad):
    """``target += grad`` outside the graph; one ufunc call when the dtypes are the same
    (the shapes broadcast as numpy does), else the runtime's casting version. Either may be
    an array (Note [Gradients as arrays]): an array has no version to bump."""
    data = _data_of(target)
    other = _data_of(grad)
    if data.dtype is other.dtype:
        if not _small_add_into(data, other):  # Note [Small kernels] (gradviz_ext/_ops.py)
            _np_add(data, other, data)
        if type(target) is not _ndarray:
            tensor: TensorBase = target
            tensor._version_counter.bump()  # an inference tensor's .grad refuses it, as torch
    else:
        _rt.add_inplace(_as_tensor(target), _as_tensor(grad))


_F32 = numpy.dtype(numpy.float32)
_F64 = numpy.dtype(numpy.float64)


def _array_sum(old, grad):
    """``old + grad``, one of them an array (Note [Gradients as arrays]): an array when both
    are float32 or both float64 of one shape (the bits of ``add``: ``_add_arrays``), else the
    runtime's ``add`` of the two as Tensors (promotion, broadcasting)."""
    a = _data_of(old)
    b = _data_of(grad)
    dtype = _dtype_of(a)
    if (dtype is _dtype_of(b) and (dtype is _F32 or dtype is _F64)
            and a.shape == b.shape):
        return _add_arrays(a, b)
    return _rt.add(_as_tensor(old), _as_tensor(grad))


def _expandable(shape, target):
    """Whether ``shape`` broadcasts to ``target`` (PyTorch's is_expandable_to)."""
    ndim = len(shape)
    target_ndim = len(target)
    if ndim > target_ndim:
        return False
    for i in range(1, ndim + 1):
        size = shape[ndim - i]
        target_size = target[target_ndim - i]
        if size != target_size and size != 1:
            return False
    return True


def _check_hook_values(hook, originals, result):
    """A node pre- or post-hook returned ``result`` for ``originals``: PyTorch's checks
    (torch/csrc/autograd/python_hook.cpp): a tuple of the same length, each entry valid."""
    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(result).__name__}'")
    if len(result) != len(originals):
        raise RuntimeError(
            f"hook '{_hook_error_name(hook)}' has returned an incorrect number of values "
            f"(got {len(result)}, but expected {len(originals)})"
        )
    for index in range(len(result)):
        _check_hook_value(hook, originals[index], result[index])


def _check_hook_value(hook, original, value):
    """One gradient a hook put in place of ``original`` (PyTorch's check_single_result)."""
    if value is None:
        return
    if original is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    if not isinstance(value, TensorBase):
        raise TypeError(f"expected Variable, but hook returned '{type(value).__name__}'")
    if value._data.dtype != original._data.dtype:
        raise RuntimeError(
            f"hook '{_hook_error_name(hook)}' has changed the type of value (was "
            f"{_rt.describe(original)} got {_rt.describe(value)})"
        )
    if value._data.shape != original._data.shape:
        raise RuntimeError(
            f"hook '{_hook_error_name(hook)}' has changed the size of value (was "
            f"{list(original._data.shape)} got {list(value._data.shape)})"
        )


def _hook_error_name(hook):
    """The hook's name as PyTorch prints it in errors (``__name__``)."""
    return getattr(hook, "__name__", "<unknown>")
