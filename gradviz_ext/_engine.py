# cython: language_level=3
"""The autograd engine: version counters, tensors' autograd fields, graph nodes, saved
tensors and graph tasks.

This file is the one source of truth for the engine algorithm. It is written in Cython's
pure-Python mode: ``_engine.pxd`` beside it turns the classes into extension types when it
is compiled, and ``GRADVIZ_PURE_PYTHON=1`` runs this very file interpreted (see
``gradviz_ext/__init__.py``). Keep it valid, readable Python.

Note [Engine order]
-------------------
A graph task executes one node per ``step()``, in PyTorch's order:

1. tensor pre-hooks of each input slot, then the node's pre-hooks;
2. zero-materialization of missing gradients (custom Functions that ask for it, and
   built-in nodes that received at least one gradient);
3. the node's backward (``Node.apply``), under grad mode only with ``create_graph``;
4. validation of the results: one per edge, shape reduced or rejected, dtype cast to what
   the successor expects;
5. the node's post-hooks;
6. release of saved tensors unless the graph is retained;
7. each result is added to its successor's input buffer; a successor whose dependency
   count reaches zero joins the ready queue, ordered by higher ``sequence_nr`` first.

Note [Observer cost]
--------------------
Every event point is ``if observer is not None: observer.<kind>(...)``. Without an
observer nothing is built, so the idle cost is one pointer test per point.
"""

import heapq
import os
import time
import weakref

import cython

if cython.compiled:
    from cython.cimports.cpython.pythread import PyThread_get_thread_ident as _thread_ident
else:
    from threading import get_ident as _thread_ident

# Note [Quiet backward]: PyTorch never warns about inf or NaN; numpy does unless told not to.
# A graph task silences numpy's floating-point warnings while it runs nodes, with one context
# variable set per run() or step() rather than one per op (numpy 2 keeps its error state in
# this context variable; np.errstate is the fallback). Forward ops silence themselves
# (gradviz_ext._ops, Note [Op fast paths]).
try:
    from numpy._core.umath import _extobj_contextvar as _errstate_var
    from numpy._core.umath import _make_extobj

    _errstate_quiet = _make_extobj(all="ignore")
except ImportError:  # numpy < 2
    _errstate_var = None
    _errstate_quiet = None

# --------------------------------------------------------------------------------------
# Grad mode (core state: the engine sets it while it runs a node)
# --------------------------------------------------------------------------------------

# Note [Per-thread grad mode]: as in PyTorch, grad mode belongs to a thread and a new thread
# starts with it on. The thread that imported gradviz (normally the main thread, the one a
# notebook kernel runs cells on) keeps its mode in ``_grad_enabled``, a C flag read with one
# thread-id comparison; any other thread's mode lives in ``_thread_grad_modes``, and only
# while it is off (a thread that turns it back on leaves nothing behind).
_grad_enabled = True
_owner_thread = _thread_ident()
_thread_grad_modes = {}


@cython.ccall
def is_grad_enabled():
    """Whether operations are recorded in the graph on this thread (``gradviz.is_grad_enabled``)."""
    ident = _thread_ident()
    if ident == _owner_thread:
        return _grad_enabled
    return _thread_grad_modes.get(ident, True)


@cython.ccall
def set_grad_enabled_flag(mode):
    """Set this thread's grad mode and return its previous value (the context managers build
    on this)."""
    global _grad_enabled
    enabled: cython.bint = bool(mode)
    ident = _thread_ident()
    if ident == _owner_thread:
        previous: cython.bint = _grad_enabled
        _grad_enabled = enabled
        return previous
    before = _thread_grad_modes.get(ident, True)
    if enabled:
        _thread_grad_modes.pop(ident, None)
    else:
        _thread_grad_modes[ident] = False
    return before


def threads_with_grad_disabled():
    """Idents of the threads (other than the owner) whose grad mode is off right now."""
    return sorted(_thread_grad_modes)


# --------------------------------------------------------------------------------------
# Runtime: the tensor operations the engine needs, installed by gradviz._tensor at import.
# The engine sits below the ops layer; this table is its one upward dependency (the
# HIPS-autograd / JAX pattern), so there is no import cycle.
# --------------------------------------------------------------------------------------


class Runtime:
    """Tensor operations the engine calls; filled by ``install_runtime``."""

    def __init__(self):
        self.add = None          # (a, b) -> a + b, differentiable under grad mode
        self.add_inplace = None  # (a, b) -> a, with a's data += b's data, grad mode off
        self.clone = None        # (t) -> differentiable copy
        self.detach = None       # (t) -> tensor sharing data, no history
        self.zeros = None        # (shape, dtype) -> tensor of zeros
        self.sum_to = None       # (t, shape) -> t summed down to shape
        self.cast = None         # (t, dtype) -> t converted (differentiable)
        self.make = None         # (ndarray, requires_grad, grad_fn, output_nr, version_counter) -> tensor
        self.describe = None     # (t) -> "[gradviz.FloatTensor [2, 3]]" for error messages


_rt = Runtime()


def install_runtime(**functions):
    """Install the tensor operations listed on :class:`Runtime`."""
    for name, fn in functions.items():
        if not hasattr(_rt, name):
            raise TypeError(f"unknown runtime function {name!r}")
        setattr(_rt, name, fn)


def runtime():
    return _rt


# --------------------------------------------------------------------------------------
# Tensors' autograd fields
# --------------------------------------------------------------------------------------


class VersionCounter:
    """Counts in-place modifications; shared by a tensor and all its views."""

    def __init__(self):
        self.value = 0

    def bump(self):
        self.value += 1


class TensorBase:
    """The fields of a tensor that the engine reads and writes.

    ``gradviz.Tensor`` subclasses this and adds the user-facing API.
    """

    def __init__(self, data, requires_grad=False):
        self._data = data
        self._requires_grad = requires_grad
        self.grad_fn = None
        self._output_nr = 0
        self.grad = None
        self._version_counter = VersionCounter()
        self._base = None
        self._grad_accumulator = None
        self._retains_grad = False
        self._hooks = None
        self._post_accumulate_hooks = None


# --------------------------------------------------------------------------------------
# Graph nodes
# --------------------------------------------------------------------------------------

_next_sequence_nr = 0
_next_node_id = 0
ACCUMULATE_GRAD_SEQUENCE_NR = 2 ** 63 - 1  # PyTorch gives AccumulateGrad UINT64_MAX: run leaves first


@cython.no_gc  # a shape tuple and a dtype: never part of a cycle, so no GC bookkeeping
@cython.cclass
class InputMeta:
    """What a node expects on one input slot: the forward output's shape and dtype."""

    def __init__(self, shape, dtype):
        self.shape = shape
        self.dtype = dtype
        self.np_dtype = dtype.numpy if dtype is not None else None  # compared in _validate

    def __repr__(self):
        return f"InputMeta(shape={list(self.shape)}, dtype={self.dtype})"


class RemovableHandle:
    """Returned by ``register_hook``-style calls; ``remove()`` unregisters the hook."""

    def __init__(self, container, hook):
        self._container = weakref.ref(container) if container is not None else None
        self._hook = hook

    def remove(self):
        container = self._container() if self._container is not None else None
        if container is not None:
            for i, hook in enumerate(container):
                if hook is self._hook:
                    del container[i]
                    break
        self._container = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class _HookList(list):
    """A list that can be weak-referenced (RemovableHandle holds a weak reference)."""

    __slots__ = ("__weakref__",)


@cython.trashcan(True)  # freeing a 10^6-node chain must not recurse 10^6 deep in C
@cython.cclass
class Node:
    """A node of the backward graph (``grad_fn``).

    ``next_functions`` holds one ordered edge ``(node, input_nr)`` per tensor input of the
    forward operation; ``(None, 0)`` for an input that needs no gradient.
    """

    def __init__(self, next_functions=(), input_metadata=(), sequence_nr=-1):
        global _next_sequence_nr, _next_node_id
        self.next_functions = tuple(next_functions)
        self._input_metadata = tuple(input_metadata)
        if sequence_nr < 0:
            self._seq = _next_sequence_nr
            _next_sequence_nr += 1
        else:
            self._seq = sequence_nr
        self._id = _next_node_id
        _next_node_id += 1
        self._pre_hooks = None
        self._post_hooks = None
        self._tensor_pre_hooks = None
        self._metadata = None
        self._released = False
        # Note [Anomaly mode]: one flag test when anomaly mode is off
        self._forward_site = _capture_forward_site() if _anomaly_enabled else None

    # ---- identity ------------------------------------------------------------------
    def name(self):
        return type(self).__name__

    def _sequence_nr(self):
        return self._seq

    @property
    def node_id(self):
        """A stable integer id, unique in this process, assigned at creation."""
        return self._id

    @property
    def metadata(self):
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    @property
    def num_inputs(self):
        return len(self._input_metadata)

    def input_metadata(self, slot):
        return self._input_metadata[slot]

    def __repr__(self):
        return f"<{self.name()} object at {hex(id(self))}>"

    # ---- behaviour, overridden by subclasses ---------------------------------------
    def apply(self, grads):
        raise NotImplementedError(f"{self.name()} does not implement apply")

    def release_variables(self):
        """Free saved tensors. Subclasses that save tensors override and call this."""
        self._released = True

    def saved_tensor_count(self):
        """(count, bytes) of tensors this node currently holds for backward."""
        return 0, 0

    def _materializes_grads(self):
        return True

    def _kind(self):
        return "builtin"

    # ---- hooks -----------------------------------------------------------------------
    def register_hook(self, fn):
        """Register ``fn(grad_inputs, grad_outputs)`` to run after this node's backward."""
        if self._post_hooks is None:
            self._post_hooks = _HookList()
        self._post_hooks.append(fn)
        return RemovableHandle(self._post_hooks, fn)

    def register_prehook(self, fn):
        """Register ``fn(grad_outputs)`` to run before this node's backward."""
        if self._pre_hooks is None:
            self._pre_hooks = _HookList()
        self._pre_hooks.append(fn)
        return RemovableHandle(self._pre_hooks, fn)

    def _register_tensor_pre_hook(self, slot, fn):
        if self._tensor_pre_hooks is None:
            self._tensor_pre_hooks = {}
        hooks = self._tensor_pre_hooks.get(slot)
        if hooks is None:
            hooks = _HookList()
            self._tensor_pre_hooks[slot] = hooks
        hooks.append(fn)
        return RemovableHandle(hooks, fn)


@cython.ccall
def init_node(node: Node, next_functions: tuple, input_metadata: tuple):
    """Initialize a node made with ``__new__`` (the fast path of gradviz_ext._ops)."""
    global _next_sequence_nr, _next_node_id
    node.next_functions = next_functions
    node._input_metadata = input_metadata
    node._seq = _next_sequence_nr
    _next_sequence_nr += 1
    node._id = _next_node_id
    _next_node_id += 1
    node._pre_hooks = None
    node._post_hooks = None
    node._tensor_pre_hooks = None
    node._metadata = None
    node._released = False
    # Note [Anomaly mode]: one flag test when anomaly mode is off
    node._forward_site = _capture_forward_site() if _anomaly_enabled else None


class AccumulateGrad(Node):
    """The node of a leaf tensor that requires grad: adds the incoming gradient to ``.grad``."""

    def __init__(self, variable):
        meta = InputMeta(variable._data.shape, variable.dtype)
        Node.__init__(self, (), (meta,), ACCUMULATE_GRAD_SEQUENCE_NR)
        self.variable = variable
        # A leaf's tensor hooks live on the tensor (``_hooks``), because this node is only
        # weakly held by the leaf and may be recreated; every accumulator shares them.
        if variable._hooks is not None:
            self._tensor_pre_hooks = variable._hooks

    def _kind(self):
        return "accumulate_grad"

    def apply(self, grads):
        # The engine calls _accumulate instead (it needs the task for ownership and events).
        return ()


class GraphRoot(Node):
    """Feeds the initial gradients of several roots into the graph."""

    def __init__(self, edges, grads):
        Node.__init__(self, edges, (), ACCUMULATE_GRAD_SEQUENCE_NR)
        self.grads = list(grads)

    def apply(self, grads):
        return self.grads


@cython.ccall
def gradient_edge(tensor: TensorBase):
    """The edge a gradient for ``tensor`` flows into: ``(grad_fn, output_nr)`` for a
    non-leaf, ``(AccumulateGrad, 0)`` for a leaf that requires grad, else ``(None, 0)``."""
    fn = tensor.grad_fn
    if fn is not None:
        return (fn, tensor._output_nr)
    if tensor._requires_grad:
        return (grad_accumulator(tensor), 0)
    return (None, 0)


@cython.ccall
def grad_accumulator(tensor: TensorBase):
    """The leaf's AccumulateGrad node, created on first use and shared while it lives."""
    ref = tensor._grad_accumulator
    acc = ref() if ref is not None else None
    if acc is None:
        acc = AccumulateGrad(tensor)
        tensor._grad_accumulator = weakref.ref(acc)
    return acc


# --------------------------------------------------------------------------------------
# Saved tensors
# --------------------------------------------------------------------------------------

BACKWARD_TWICE_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


# Note [Saved-tensor hooks]
# ``gradviz.autograd.graph.saved_tensors_hooks(pack, unpack)`` pushes a pair here. A
# SavedTensor created while the stack is not empty calls the innermost ``pack`` once, keeps
# only what it returned, and calls ``unpack`` on every access. As in PyTorch, such a saved
# tensor is not version-checked (the hooks may store anything), and the unpacked tensor is
# rebuilt with the saved autograd identity (grad_fn / output_nr, or the leaf's accumulator).
_saved_tensors_hooks = []


def push_saved_tensors_hooks(pack_hook, unpack_hook):
    """Make ``(pack_hook, unpack_hook)`` the innermost saved-tensor hooks."""
    _saved_tensors_hooks.append((pack_hook, unpack_hook))


def pop_saved_tensors_hooks():
    """Remove the innermost saved-tensor hooks (the end of a ``saved_tensors_hooks`` block)."""
    _saved_tensors_hooks.pop()


class SavedTensor:
    """A tensor saved for backward, with the version it had when saved.

    An output of the node that saves it is stored without its ``grad_fn`` (that would be a
    reference cycle) and rebuilt on unpack, like PyTorch's SavedVariable. Under saved-tensor
    hooks only the packed value is kept (Note [Saved-tensor hooks]).
    """

    def __init__(self, tensor, is_output):
        self._init(tensor, is_output)

    def _init(self, tensor, is_output):
        self._packed = None
        self._unpack_hook = None
        self._grad_fn = None
        self._grad_accumulator = None
        self._version_counter = tensor._version_counter
        self._saved_version = tensor._version_counter.value
        self._is_output = is_output
        self._output_nr = tensor._output_nr
        self._requires_grad = tensor._requires_grad or tensor.grad_fn is not None
        self._has_hooks = False
        if _saved_tensors_hooks:
            self._save_packed(tensor, is_output)
            return
        if is_output:
            self._tensor = None
            self._data = tensor._data
        else:
            self._tensor = tensor
            self._data = None

    def _save_packed(self, tensor, is_output):
        pack_hook, unpack_hook = _saved_tensors_hooks[-1]
        self._has_hooks = True
        self._tensor = None
        self._data = None
        self._unpack_hook = unpack_hook
        # Non-outputs keep their own history; an output gets the saving node back on unpack.
        self._grad_fn = None if is_output else tensor.grad_fn
        self._grad_accumulator = None if is_output else tensor._grad_accumulator
        self._packed = pack_hook(tensor)
        # [debugger addition] saved-tensor hook events; only under hooks, never on the hot path
        if _forward_observer is not None:
            _forward_observer.saved_packed(self, pack_hook)

    def nbytes(self):
        if self._has_hooks:
            return 0  # what the pack hook returned is opaque
        data = self._data if self._tensor is None else self._tensor._data
        return data.nbytes if data is not None else 0

    def unpack(self, node):
        """The saved tensor, or PyTorch's error if it was freed or modified in place."""
        if self._has_hooks:
            return self._unpack_with_hook(node)
        if self._tensor is None and self._data is None:
            raise RuntimeError(BACKWARD_TWICE_MESSAGE)
        current = self._version_counter.value
        if current != self._saved_version:
            if self._is_output:
                what = f"output {self._output_nr} of {node.name()}"
            elif self._tensor.grad_fn is not None:
                what = f"output {self._tensor._output_nr} of {self._tensor.grad_fn.name()}"
            else:
                what = "a leaf tensor"
            shown = _rt.describe(self._tensor if self._tensor is not None else self._data)
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: {shown}, which is {what}, is at version {current}; expected "
                f"version {self._saved_version} instead. Hint: the tensor was saved by "
                f"{node.name()} and changed in place before backward; clone it before the "
                "in-place operation, or enable anomaly detection to find the operation."
            )
        if self._tensor is not None:
            return self._tensor
        grad_fn = node if self._requires_grad else None
        return _rt.make(self._data, False, grad_fn, self._output_nr, self._version_counter)

    def unpack_data(self, node):
        """The saved tensor's array, with ``unpack``'s checks (for fast backward rules)."""
        if (self._has_hooks or self._version_counter.value != self._saved_version
                or (self._tensor is None and self._data is None)):
            return self.unpack(node)._data  # raises the right error, or runs the hook
        if self._tensor is not None:
            tensor: TensorBase = self._tensor
            return tensor._data
        return self._data

    def _unpack_with_hook(self, node):
        if self._unpack_hook is None:
            raise RuntimeError(BACKWARD_TWICE_MESSAGE)
        value = self._unpack_hook(self._packed)
        # [debugger addition] saved-tensor hook events; only under hooks, never on the hot path
        task = _running_task
        if task is not None and task.observer is not None:
            task.observer.saved_unpacked(task, node, self, self._unpack_hook)
        if not isinstance(value, TensorBase):
            raise TypeError(
                "Output of saved tensor unpack_hook expected to be a Tensor but got result of "
                f"type {type(value).__name__}"
            )
        if self._is_output:
            grad_fn = node if self._requires_grad else None
        else:
            grad_fn = self._grad_fn
        leaf_requires_grad = self._requires_grad and grad_fn is None
        result = _rt.make(value._data, leaf_requires_grad, grad_fn, self._output_nr, None)
        if leaf_requires_grad:
            result._grad_accumulator = self._grad_accumulator
        return result

    def release(self):
        self._tensor = None
        self._data = None
        if self._has_hooks:
            self._packed = None
            self._unpack_hook = None
            self._grad_fn = None


@cython.ccall
def save_tensor(tensor: TensorBase, is_output: cython.bint) -> SavedTensor:
    """``SavedTensor(tensor, is_output)`` without a Python-level constructor call."""
    saved: SavedTensor = SavedTensor.__new__(SavedTensor)
    saved._init(tensor, is_output)
    return saved


# --------------------------------------------------------------------------------------
# Observers
# --------------------------------------------------------------------------------------


class Observer:
    """Receives the engine's events. Override the kinds you need; the rest do nothing.

    The engine calls these with live objects (nodes, tensors); turning them into event
    records is the observer's job (gradviz.instrument), so an engine without observers
    builds nothing.
    """

    def backward_started(self, task): pass
    def node_ready(self, task, node): pass
    def buffer_added(self, task, node, slot, producer, how): pass
    def node_started(self, task, node, grads): pass
    def prehook(self, task, node, hook, slot, before, after): pass
    def grads_materialized(self, task, node, slots): pass
    def grad_cast(self, task, node, slot, from_dtype, to_dtype): pass
    def grad_reduced(self, task, node, slot, from_shape, to_shape): pass
    def posthook(self, task, node, hook, grad_inputs, grad_outputs, replaced): pass
    def node_finished(self, task, node, grads_in, grads_out, duration): pass
    def grad_accumulated(self, task, node, variable, before, after): pass
    def saved_released(self, task, node, count, nbytes): pass
    def backward_finished(self, task, duration): pass
    def error(self, task, node, exc): pass
    def buffers_exposed(self, task, node, entries): pass
    # saved-tensor hooks ran: pack (forward observer, no task yet) and unpack (during a task)
    def saved_packed(self, saved, hook): pass
    def saved_unpacked(self, task, node, saved, hook): pass


_default_observer = None
_forward_observer = None
_running_task = None
_anomaly_enabled = False


def current_graph_task():
    """The graph task whose ``step()`` is running a node right now (innermost), or None.

    ``task.current`` is that node. A custom backward that starts its own backward pass
    nests a task; when that inner task finishes, the outer one is current again.
    """
    return _running_task


def set_anomaly_enabled(mode, check_nan=True):
    """Set the engine's anomaly-mode flags and return the previous ``mode``.

    The flags behind ``gradviz.autograd.detect_anomaly`` (Note [Anomaly mode]). Under anomaly
    mode, input buffers are also never exposed to custom backwards
    (``GraphTask.expose_input_buffers``).
    """
    global _anomaly_enabled, _anomaly_check_nan
    previous = _anomaly_enabled
    _anomaly_enabled = bool(mode)
    _anomaly_check_nan = bool(check_nan)
    return previous


def is_anomaly_enabled():
    return _anomaly_enabled


def is_anomaly_check_nan_enabled():
    return _anomaly_check_nan


# Note [Anomaly mode]
# -------------------
# ``gradviz.autograd.detect_anomaly`` sets ``_anomaly_enabled``. While it is set:
# * every node records where forward created it (``Node._forward_site``, a ForwardSite:
#   the user's frames, gradviz's own left out, and the node that was running if the node was
#   created by a backward under ``create_graph``);
# * after a node's results are final (post-hooks ran), they are checked for NaN
#   (``_check_nan``, unless ``check_nan=False``), with PyTorch's message;
# * any exception raised while a node runs is reported with that node's forward traceback,
#   as PyTorch does: a UserWarning "Error detected in <name>. Traceback of forward call that
#   caused the error:", and the same text added to the exception as a note.
# When the flag is off, each of these points costs one flag test.
_anomaly_check_nan = True
_PACKAGE_DIRS = (
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gradviz") + os.sep,
)


class ForwardSite:
    """Where forward created a node (anomaly mode): frames outermost first, and the node
    whose backward was running at the time (``parent``, for higher-order graphs)."""

    def __init__(self, frames, parent):
        self.frames = frames  # list of (filename, lineno, function, line)
        self.parent = parent

    def format(self):
        """The frames as a traceback: ``File "...", line N, in f`` and the source line."""
        lines = []
        for filename, lineno, function, line in self.frames:
            lines.append(f'  File "{filename}", line {lineno}, in {function}\n')
            if line:
                lines.append(f"    {line}\n")
        return "".join(lines)

    def __repr__(self):
        last = self.frames[-1] if self.frames else None
        where = f"{last[0]}:{last[1]}" if last is not None else "?"
        return f"<ForwardSite {where}>"


def _capture_forward_site():
    import linecache
    import sys

    frames = []
    frame = sys._getframe(0)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_PACKAGE_DIRS):
            lineno = frame.f_lineno
            frames.append((filename, lineno, frame.f_code.co_name,
                           linecache.getline(filename, lineno).strip()))
        frame = frame.f_back
    frames.reverse()
    task = _running_task
    return ForwardSite(frames, task.current if task is not None else None)


def anomaly_report(node):
    """PyTorch's anomaly-mode text for an error in ``node``: its forward traceback, then the
    traceback of each node whose backward created it (double backward)."""
    site = node._forward_site
    if site is None:
        return (f"Error detected in {node.name()}. No forward pass information available. "
                "Enable detect anomaly during forward pass for more information.")
    text = (f"Error detected in {node.name()}. Traceback of forward call that caused the "
            f"error:\n{site.format()}")
    parent = site.parent
    seen = 0
    while parent is not None and seen < 100:
        parent_site = parent._forward_site
        if parent_site is None:
            break
        text += (f"\nPrevious calculation was induced by {parent.name()}. Traceback of forward "
                 f"call that induced the previous calculation:\n{parent_site.format()}")
        parent = parent_site.parent
        seen += 1
    return text


def _report_anomaly(node, exc):
    """Warn with, and note on ``exc``, the forward traceback of the node that failed."""
    import warnings

    text = anomaly_report(node)
    warnings.warn(text, UserWarning, stacklevel=2)
    if hasattr(exc, "add_note"):
        exc.add_note(text)


def _check_nan(node, outputs):
    """Anomaly mode: PyTorch's error when a node's backward produced NaN."""
    for index in range(len(outputs)):
        grad = outputs[index]
        if grad is None:
            continue
        data = grad._data
        if data.dtype.kind in "fc" and (data != data).any():
            raise RuntimeError(
                f"Function '{node.name()}' returned nan values in its {index}th output.")


def set_default_observer(observer):
    """Observe every graph task created from now on; returns the previous observer."""
    global _default_observer
    previous = _default_observer
    _default_observer = observer
    return previous


def set_forward_observer(observer):
    """Receive ``node_created(node)`` for every node recorded in forward (and
    ``saved_packed(saved, hook)`` when a saved-tensor pack hook runs); returns the previous."""
    global _forward_observer
    previous = _forward_observer
    _forward_observer = observer
    return previous


@cython.ccall
def forward_observer():
    return _forward_observer


# --------------------------------------------------------------------------------------
# Graph tasks
# --------------------------------------------------------------------------------------

PAUSED = 0
RUNNING = 1
FINISHED = 2
ABORTED = 3
FAILED = 4
_STATE_NAMES = ("paused", "running", "finished", "aborted", "error")


class InputBuffer:
    """The gradients that reached one pending node so far, slot by slot, summed.

    ``owned`` is None until the engine sums two contributions; then ``owned[i]`` says the
    engine created ``grads[i]`` itself (a sum), so nobody else holds it and it can be updated
    in place. A buffer in the ready queue is ordered by ``node``'s sequence number, higher
    first, then by ``order`` (first come, first served).
    """

    def __init__(self, node, size):
        self.node = node
        self.grads = [None] * size
        self.owned = None
        self.order = 0

    def is_owned(self, slot):
        return self.owned is not None and self.owned[slot]

    def set_owned(self, slot):
        if self.owned is None:
            self.owned = [False] * len(self.grads)
        self.owned[slot] = True


@cython.cfunc
def _new_buffer(node: Node, size: cython.Py_ssize_t) -> InputBuffer:
    buffer: InputBuffer = InputBuffer.__new__(InputBuffer)
    buffer.node = node
    buffer.grads = [None] * size
    buffer.owned = None
    buffer.order = 0
    return buffer


# The ready queue is a binary heap of InputBuffers in a list, kept here rather than with
# heapq so that ordering compares two C fields instead of building a key tuple per push.
@cython.cfunc
def _runs_before(a: InputBuffer, b: InputBuffer) -> cython.bint:
    seq_a: cython.longlong = a.node._seq
    seq_b: cython.longlong = b.node._seq
    return seq_a > seq_b or (seq_a == seq_b and a.order < b.order)


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
def _all_none(grads: list) -> cython.bint:
    for grad in grads:
        if grad is not None:
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
    """

    def __init__(self, roots, grads, keep_graph=False, create_graph=False, capture=None,
                 accumulate_into=None, observer=None):
        self.keep_graph = bool(keep_graph or create_graph)
        self.create_graph = bool(create_graph)
        self.observer = observer if observer is not None else _default_observer
        self.state = PAUSED
        self.error = None
        self.error_node = None
        self.current = None
        self._ready = []
        self._ready_counter = 0
        self._not_ready = {}
        self._dependencies = {}
        self._exec_info = None
        self._captures = None
        self.captured = None
        self._retains = None
        self._started_at = 0.0
        self._executed = 0
        self._exposed_to = None
        outer = _running_task
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
            initial.grads[root_slot] = grads[0]
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
        if self.observer is not None:
            self.observer.backward_started(self)
            self.observer.node_ready(self, root_node)

    # ---- set-up --------------------------------------------------------------------
    def _compute_dependencies(self, root):
        """Count, for each reachable node, the edges that point at it (iteratively)."""
        dependencies = self._dependencies
        seen = {root}
        stack = [root]
        while stack:
            node = stack.pop()
            for next_node, _ in node.next_functions:
                if next_node is None:
                    continue
                dependencies[next_node] = dependencies.get(next_node, 0) + 1
                if next_node not in seen:
                    seen.add(next_node)
                    stack.append(next_node)

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
                if tensor.grad_fn is None:
                    targets[node] = True  # the leaf's AccumulateGrad runs
                else:
                    if self._retains is None:
                        self._retains = {}
                    self._retains.setdefault(node, []).append((slot, tensor))
                    targets.setdefault(node, False)
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
        if not self._ready or self.state >= FINISHED:
            return None
        return self._ready[0].node

    def ready_nodes(self):
        """Nodes in the ready queue, in the order they will run."""
        ordered = sorted(self._ready, key=lambda buffer: (-buffer.node._seq, buffer.order))
        return [buffer.node for buffer in ordered]

    def pending_buffer(self, node):
        """The gradients collected so far for a node that has not run (a copy of the list)."""
        buffer = self._not_ready.get(node)
        if buffer is None:
            for item in self._ready:
                if item.node is node:
                    buffer = item
        return None if buffer is None else list(buffer.grads)

    def expose_input_buffers(self, node):
        """Offer the running custom node the pending input buffers of its successors.

        Returns one ``(tensor or None, reason)`` per edge of ``node.next_functions``: the
        engine's current sum of the gradients that already reached the input on that edge,
        which the node may add its own contribution to in place (and then return ``None``
        for it). The rules of ``ctx.input_grad_buffers`` (spec ``000_*.txt``):

        * only for ``node`` while it is this task's running node;
        * never under ``create_graph``, anomaly mode, or when ``node`` has post-hooks (they
          must see every gradient the node produces);
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
        elif _anomaly_enabled:
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
                pending = self._not_ready.get(next_node)
                grad = None if pending is None else pending.grads[slot]
                if grad is None:
                    reason = "no earlier contribution"
                elif grad.grad_fn is not None or grad._requires_grad:
                    reason = "the pending gradient is part of a graph"
                elif pending.is_owned(slot):
                    buffer = grad
                    reason = "engine-owned sum"
                else:
                    buffer = _rt.detach(_rt.clone(grad))
                    pending.grads[slot] = buffer
                    pending.set_owned(slot)
                    reason = "stored contribution copied into an engine-owned buffer"
            if buffer is not None:
                exposed_any = True
            results.append((buffer, reason))
        if exposed_any:
            self._exposed_to = node
        if self.observer is not None:
            self.observer.buffers_exposed(self, node, [
                {"edge": index, "exposed": buffer is not None, "reason": reason}
                for index, (buffer, reason) in enumerate(results)])
        return results

    def end_input_buffers(self, node):
        """``node``'s backward returned: buffers it received are no longer in use."""
        if self._exposed_to is node:
            self._exposed_to = None

    def dependencies(self):
        """Remaining dependency counts of the nodes that have not become ready."""
        return dict(self._dependencies)

    def is_needed(self, node):
        if self._exec_info is None:
            return True
        return self._exec_info.get(node, False)

    # ---- execution -----------------------------------------------------------------
    def run(self):
        """Run to the end and return the captured gradients (``autograd.grad``) or None."""
        if _errstate_var is None:
            import numpy

            with numpy.errstate(all="ignore"):
                while self._step() is not None:
                    pass
            return self.captured
        token = _errstate_var.set(_errstate_quiet)  # Note [Quiet backward]
        try:
            while self._step() is not None:
                pass
        finally:
            _errstate_var.reset(token)
        return self.captured

    def abort(self):
        """Stop the task; the graph is left as it is (saved tensors freed only where nodes ran)."""
        if self.state < FINISHED:
            self.state = ABORTED
            self._ready = []
            self._not_ready = {}

    def step(self):
        """Run the next ready node and return it; None when the task is over."""
        if _errstate_var is None:
            import numpy

            with numpy.errstate(all="ignore"):
                return self._step()
        token = _errstate_var.set(_errstate_quiet)  # Note [Quiet backward]
        try:
            return self._step()
        finally:
            _errstate_var.reset(token)

    def _step(self):
        if self.state >= FINISHED:
            return None
        if not self._ready:
            self._finish()
            return None
        if self._executed == 0:
            self._started_at = time.perf_counter()
        buffer: InputBuffer = _heap_pop(self._ready)
        node: Node = buffer.node
        self.current = node
        self.state = RUNNING
        # PyTorch runs the whole node (hooks, backward, accumulation) in the graph task's
        # grad mode, which is create_graph.
        global _running_task
        previous = set_grad_enabled_flag(self.create_graph)
        outer_task = _running_task
        _running_task = self
        try:
            self._execute(node, buffer)
        except BaseException as exc:
            self.state = FAILED
            self.error = exc
            self.error_node = node
            self._ready = []
            self._not_ready = {}
            if self.observer is not None:
                self.observer.error(self, node, exc)
            if _anomaly_enabled and isinstance(exc, Exception):  # Note [Anomaly mode]
                _report_anomaly(node, exc)
            raise
        finally:
            set_grad_enabled_flag(previous)
            _running_task = outer_task
            self.current = None
        self._executed += 1
        if self._ready:
            self.state = PAUSED
        else:
            self._finish()
        return node

    def _finish(self):
        if self.state >= FINISHED:
            return
        self.state = FINISHED
        if self.observer is not None:
            self.observer.backward_finished(self, time.perf_counter() - self._started_at)

    def _push_ready(self, buffer):
        self._ready_counter += 1
        buffer.order = self._ready_counter
        _heap_push(self._ready, buffer)

    def _execute(self, node, buffer):
        observer = self.observer
        grads: list = buffer.grads
        # A sum the engine made itself can become the leaf's .grad without a copy.
        owned_grad = grads[0] if (grads and buffer.is_owned(0)) else None
        started = time.perf_counter() if observer is not None else 0.0
        if observer is not None:
            observer.node_started(self, node, list(grads))

        # 1. tensor pre-hooks, then node pre-hooks
        if node._tensor_pre_hooks is not None:
            self._run_tensor_pre_hooks(node, grads)
        if self._captures is not None:
            captures = self._captures.get(node)
            if captures is not None:
                for slot, index in captures:
                    self.captured[index] = grads[slot]
        if self._retains is not None:
            retains = self._retains.get(node)
            if retains is not None:
                for slot, tensor in retains:
                    self._accumulate_into(tensor, grads[slot], None)
        if self._exec_info is not None and not self._exec_info.get(node, False):
            if observer is not None:
                observer.node_finished(self, node, list(grads), [], time.perf_counter() - started)
            return
        if node._pre_hooks is not None:
            grads = self._run_pre_hooks(node, grads)

        if isinstance(node, AccumulateGrad):
            self._accumulate(node, grads, owned_grad)
            outputs = []
            if node._post_hooks is not None:  # PyTorch passes grad_inputs == ()
                self._run_post_hooks(node, outputs, grads)
        else:
            # A built-in node that received no gradient at all passes None on without running,
            # like PyTorch's generated backward functions; a custom Function still runs.
            skip: cython.bint = (_all_none(grads) and not isinstance(node, GraphRoot)
                                 and node._kind() == "builtin")
            # 2. zero-materialization
            if not skip and node._materializes_grads():
                grads = self._materialize(node, grads)
            # 3. backward (grad mode is already create_graph: see _step)
            if skip:
                outputs = [None] * len(node.next_functions)
            else:
                outputs = node.apply(grads)
            # 4. validation
            outputs = self._validate(node, outputs)
            # 5. post-hooks
            if node._post_hooks is not None:
                outputs = self._run_post_hooks(node, outputs, grads)

        # 6. release
        if not self.keep_graph and not node._released:
            if observer is not None:
                count, nbytes = node.saved_tensor_count()
                node.release_variables()
                if count:
                    observer.saved_released(self, node, count, nbytes)
            else:
                node.release_variables()
        if _anomaly_enabled and _anomaly_check_nan and outputs:  # Note [Anomaly mode]
            _check_nan(node, outputs)
        if observer is not None:
            observer.node_finished(self, node, list(grads), list(outputs),
                                   time.perf_counter() - started)
        # 7. hand the results to the successors
        if outputs:
            self._distribute(node, outputs)

    def _run_tensor_pre_hooks(self, node, grads):
        observer = self.observer
        for slot, hooks in list(node._tensor_pre_hooks.items()):
            for hook in list(hooks):
                before = grads[slot]
                result = hook(before)
                if result is not None:
                    _check_hook_value(hook, before, result)
                    grads[slot] = result
                if observer is not None:
                    observer.prehook(self, node, hook, slot, before, grads[slot])

    def _run_pre_hooks(self, node, grads):
        observer = self.observer
        for hook in list(node._pre_hooks):
            before = list(grads)
            result = hook(tuple(grads))
            if result is not None:
                _check_hook_values(hook, grads, result)
                grads = list(result)
            if observer is not None:
                observer.prehook(self, node, hook, -1, before, list(grads))
        return grads

    def _run_post_hooks(self, node, outputs, grads):
        observer = self.observer
        for hook in list(node._post_hooks):
            result = hook(tuple(outputs), tuple(grads))
            replaced = result is not None
            if replaced:
                _check_hook_values(hook, outputs, result)
                outputs = list(result)
            if observer is not None:
                observer.posthook(self, node, hook, list(outputs), list(grads), replaced)
        return outputs

    def _materialize(self, node, grads):
        slots = None
        metas: tuple = node._input_metadata
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
        if slots is not None and self.observer is not None:
            self.observer.grads_materialized(self, node, slots)
        return grads

    def _validate(self, node, outputs):
        """Check arity; reduce shapes and cast dtypes to what each successor expects.

        Returns a new list: ``outputs`` may belong to the node's backward (a custom Function
        may keep what it returned), so it is never changed.
        """
        edges: tuple = node.next_functions
        if not isinstance(outputs, (list, tuple)):
            outputs = [outputs]
        if len(outputs) != len(edges):
            raise RuntimeError(
                f"function {node.name()} returned an incorrect number of gradients "
                f"(expected {len(edges)}, got {len(outputs)})"
            )
        result = list(outputs)
        for index in range(len(result)):
            grad = result[index]
            edge: tuple = edges[index]
            next_node = edge[0]
            if grad is None or next_node is None:
                continue
            if not isinstance(grad, TensorBase):
                raise TypeError(
                    f"function {node.name()} returned a {type(grad).__name__} as gradient "
                    f"{index}; expected a Tensor or None"
                )
            successor: Node = next_node
            meta: InputMeta = successor._input_metadata[edge[1]]
            tensor: TensorBase = grad
            data = tensor._data
            shape = data.shape
            if shape != meta.shape:
                if not _expandable(meta.shape, shape):
                    raise RuntimeError(
                        f"Function {node.name()} returned an invalid gradient at index {index} - "
                        f"got {list(shape)} but expected shape compatible with {list(meta.shape)}"
                    )
                grad = _rt.sum_to(grad, meta.shape)
                tensor = grad
                data = tensor._data
                if self.observer is not None:
                    self.observer.grad_reduced(self, node, index, shape, meta.shape)
            # numpy dtypes of the built-in types are singletons: identity first, then ==
            if meta.np_dtype is not None:
                dtype = data.dtype
                if dtype is not meta.np_dtype and dtype != meta.np_dtype:
                    from_dtype = grad.dtype
                    grad = _rt.cast(grad, meta.dtype)
                    if self.observer is not None:
                        self.observer.grad_cast(self, node, index, from_dtype, meta.dtype)
            result[index] = grad
        return result

    def _distribute(self, node, outputs):
        observer = self.observer
        edges: tuple = node.next_functions
        dependencies: dict = self._dependencies
        not_ready: dict = self._not_ready
        for index in range(len(edges)):
            edge: tuple = edges[index]
            next_node = edge[0]
            if next_node is None:
                continue
            slot: cython.Py_ssize_t = edge[1]
            grad = outputs[index]
            count = dependencies.get(next_node)
            if count is None:
                raise RuntimeError(f"dependency not found for {next_node.name()}")
            remaining: cython.Py_ssize_t = count
            remaining -= 1
            if remaining == 0:
                del dependencies[next_node]
            else:
                dependencies[next_node] = remaining
            buffer = not_ready.get(next_node)
            if buffer is None:
                if self._exec_info is not None and next_node not in self._exec_info:
                    continue
                successor: Node = next_node
                buffer = _new_buffer(successor, len(successor._input_metadata))
                if remaining != 0:
                    not_ready[next_node] = buffer
            elif remaining == 0:
                del not_ready[next_node]
            if grad is not None:
                how = self._add_to_buffer(buffer, slot, grad)
                if observer is not None:
                    observer.buffer_added(self, next_node, slot, node, how)
            if remaining == 0:
                self._push_ready(buffer)
                if observer is not None:
                    observer.node_ready(self, next_node)

    def _add_to_buffer(self, buffer, slot, grad):
        """Add ``grad`` to ``buffer``'s slot; grad mode is the task's (create_graph) here."""
        grads: list = buffer.grads
        old = grads[slot]
        if old is None:
            grads[slot] = grad
            return "stored"
        if not self.create_graph and buffer.is_owned(slot):
            _rt.add_inplace(old, grad)
            return "accumulated_in_place"
        grads[slot] = _rt.add(old, grad)
        buffer.set_owned(slot)
        return "accumulated_out_of_place"

    def _accumulate(self, node, grads, owned_grad):
        """AccumulateGrad: add the completed gradient to the leaf's ``.grad``."""
        grad = grads[0] if grads else None
        if grad is None:
            return
        variable = node.variable
        before = variable.grad
        self._accumulate_into(variable, grad, owned_grad)
        hooks = variable._post_accumulate_hooks
        if hooks is not None:
            for hook in list(hooks):
                hook(variable)
        if self.observer is not None:
            self.observer.grad_accumulated(self, node, variable, before, variable.grad)

    def _accumulate_into(self, variable, grad, owned_grad):
        """``variable.grad += grad`` the way AccumulateGrad does it (in place unless
        create_graph); grad mode is the task's (create_graph) here."""
        if grad is None:
            return
        before = variable.grad
        if before is None:
            if self.create_graph:
                variable.grad = _rt.clone(grad)
            elif grad is owned_grad:
                variable.grad = grad
            else:
                variable.grad = _rt.detach(_rt.clone(grad))
        elif self.create_graph:
            variable.grad = _rt.add(before, grad)
        else:
            _rt.add_inplace(before, grad)


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


def _hook_name(hook):
    return getattr(hook, "__qualname__", None) or getattr(hook, "__name__", None) or repr(hook)


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


def compiled():
    """True when this module runs as a compiled extension."""
    return cython.compiled


def source_path():
    return os.path.abspath(__file__)
