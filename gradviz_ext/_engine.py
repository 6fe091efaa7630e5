# cython: language_level=3
"""The autograd engine's data: grad mode, version counters, tensors' autograd fields, graph
nodes, saved tensors, and the process state graph tasks share (observers, anomaly mode, the
running task). The algorithm that runs a backward pass is ``_task.py``.

This file is written in Cython's pure-Python mode: ``_engine.pxd`` beside it turns the
classes into extension types when it is compiled, and ``GRADVIZ_PURE_PYTHON=1`` runs this
very file interpreted (see ``gradviz_ext/__init__.py``). Keep it valid, readable Python.
"""

import collections
import os
import weakref

import cython

from gradviz_ext._anomaly import capture_forward_site
from gradviz_ext._hooks import HookList, RemovableHandle  # noqa: F401  (re-exported)
from gradviz_ext._hooks import hook_name as _hook_name  # noqa: F401  (re-exported)

if cython.compiled:
    from cython.cimports.cpython.pythread import PyThread_get_thread_ident as _thread_ident
    from cython.cimports.cpython.weakref import PyWeakref_NewRef
else:
    from threading import get_ident as _thread_ident

    def PyWeakref_NewRef(obj, callback):  # noqa: N802  (the C API's name, compiled)
        return weakref.ref(obj)

# --------------------------------------------------------------------------------------
# Grad mode and inference mode (core state: the engine sets grad mode while it runs a node)
# --------------------------------------------------------------------------------------

# Note [Per-thread grad mode]: as in PyTorch, grad mode belongs to a thread and a new thread
# starts with it on. The thread that imported gradviz (normally the main thread, the one a
# notebook kernel runs cells on) keeps its mode in ``_grad_enabled``, a C flag read with one
# thread-id comparison; any other thread's mode lives in ``_thread_grad_modes``, and only
# while it is off (a thread that turns it back on leaves nothing behind).
#
# Note [Inference mode]: ``inference_mode()`` is a second per-thread flag. Inside it nothing
# is recorded even when grad mode is turned back on (``enable_grad`` inside
# ``inference_mode``: ``is_grad_enabled()`` says True, as in PyTorch, yet no graph is built),
# so ``_grad_enabled`` is the flag the engine reads, "record operations": grad mode on and
# inference mode off. ``_grad_mode`` is grad mode as set (what ``gradviz.is_grad_enabled``
# reports) and ``_inference_mode`` the inference flag, both of the owner thread; another
# thread keeps the pair in ``_thread_modes`` while it differs from (on, off), and its
# ``_thread_grad_modes`` entry (False) while it records nothing. ``_inference_threads``
# counts the threads in inference mode, so that a new tensor pays one test of a C integer
# to learn it is not an inference tensor (Note [Inference tensors]).
_grad_enabled = True
_grad_mode = True
_inference_mode = False
_owner_thread = _thread_ident()
_thread_grad_modes = {}
_thread_modes = {}
_inference_threads = 0
_DEFAULT_MODES = (True, False)  # a thread's (grad mode, inference mode) until it sets them


@cython.ccall
def is_grad_enabled():
    """Whether operations are recorded in the graph on this thread: grad mode is on and
    inference mode is off (Note [Inference mode])."""
    ident = _thread_ident()
    if ident == _owner_thread:
        return _grad_enabled
    return _thread_grad_modes.get(ident, True)


def grad_mode_enabled():
    """This thread's grad mode as set (``gradviz.is_grad_enabled``); True inside
    ``inference_mode`` under ``enable_grad``, although nothing is recorded there."""
    ident = _thread_ident()
    if ident == _owner_thread:
        return _grad_mode
    modes: tuple = _thread_modes.get(ident, _DEFAULT_MODES)
    return modes[0]


@cython.ccall
def is_inference_mode_enabled():
    """Whether this thread is in inference mode (``gradviz.is_inference_mode_enabled``)."""
    if _inference_threads == 0:
        return False
    ident = _thread_ident()
    if ident == _owner_thread:
        return _inference_mode
    modes: tuple = _thread_modes.get(ident, _DEFAULT_MODES)
    return modes[1]


@cython.ccall
def set_grad_enabled_flag(mode):
    """Set this thread's grad mode and return its previous value (the context managers build
    on this)."""
    global _grad_enabled, _grad_mode
    enabled: cython.bint = bool(mode)
    ident = _thread_ident()
    if ident == _owner_thread:
        previous: cython.bint = _grad_mode
        _grad_mode = enabled
        _grad_enabled = enabled and not _inference_mode
        return previous
    modes: tuple = _thread_modes.get(ident, _DEFAULT_MODES)
    _set_thread_modes(ident, enabled, modes[1])
    return modes[0]


@cython.ccall
def set_inference_mode_flag(mode):
    """Set this thread's inference mode and return its previous value (``inference_mode``
    builds on this; it sets grad mode too)."""
    global _grad_enabled, _inference_mode, _inference_threads
    enabled: cython.bint = bool(mode)
    ident = _thread_ident()
    if ident == _owner_thread:
        previous: cython.bint = _inference_mode
        if enabled != previous:
            _inference_threads += 1 if enabled else -1
        _inference_mode = enabled
        _grad_enabled = _grad_mode and not enabled
        return previous
    modes: tuple = _thread_modes.get(ident, _DEFAULT_MODES)
    if enabled != modes[1]:
        _inference_threads += 1 if enabled else -1
    _set_thread_modes(ident, modes[0], enabled)
    return modes[1]


def _set_thread_modes(ident, grad_mode, inference):
    """Store the modes of a thread other than the owner (Note [Inference mode])."""
    if grad_mode and not inference:
        _thread_modes.pop(ident, None)
        _thread_grad_modes.pop(ident, None)
    else:
        _thread_modes[ident] = (bool(grad_mode), bool(inference))
        _thread_grad_modes[ident] = False


def threads_with_grad_disabled():
    """Idents of the threads (other than the owner) that record nothing right now."""
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


@cython.ccall
def runtime():
    return _rt


# --------------------------------------------------------------------------------------
# Tensors' autograd fields
# --------------------------------------------------------------------------------------


# Note [Inference tensors]
# ------------------------
# As in PyTorch, a tensor made while inference mode is on is an *inference tensor*, and so is
# every view of one; a tensor made outside stays a normal tensor whatever is done to it inside
# (an in-place write, a view). PyTorch's inference tensors have no version counter; here the
# property belongs to the counter, ``VersionCounter.inference``, set when the counter is made:
# a new tensor gets a new counter (so it is an inference tensor if made inside), a view shares
# its base's (so it is one exactly when its base is), and no op needs a line of its own. The
# cost on the hot path is one test of a C integer per new tensor (``_inference_threads``).
# What an inference tensor refuses outside inference mode, as in PyTorch: being saved for
# backward (``SavedTensor``), an in-place write (``bump``: like PyTorch, which raises when
# it bumps the version, the values are written already), ``requires_grad_()``
# (gradviz._tensor); and ``._version`` anywhere.
INFERENCE_SAVED_MESSAGE = (
    "Inference tensors cannot be saved for backward. Please do not use Tensors created in "
    "inference mode in computation tracked by autograd. To work around this, you can make a "
    "clone to get a normal tensor and use it in autograd, or use `torch.no_grad()` instead of "
    "`torch.inference_mode()`."
)

INFERENCE_INPLACE_MESSAGE = (
    "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a "
    "clone to get a normal tensor before doing inplace update.See "
    "https://github.com/pytorch/rfcs/pull/17 for more details."
)


class VersionCounter:
    """Counts in-place modifications; shared by a tensor and all its views.

    ``inference`` is True for the counter of an inference tensor (Note [Inference tensors]):
    made while this thread was in inference mode."""

    def __cinit__(self):  # compiled: every construction, ``__new__`` included, runs this
        self.inference = _inference_threads != 0 and is_inference_mode_enabled()

    def __init__(self):
        self.value = 0

    def bump(self):
        """Count an in-place write, made already (Note [Inference tensors])."""
        if self.inference and not is_inference_mode_enabled():
            raise RuntimeError(INFERENCE_INPLACE_MESSAGE)
        self.value += 1


if not cython.compiled:
    def _new_version_counter(cls):
        """Interpreted: ``__cinit__``'s work for ``VersionCounter()`` and ``__new__``."""
        counter = object.__new__(cls)
        counter.inference = _inference_threads != 0 and is_inference_mode_enabled()
        return counter

    VersionCounter.__new__ = staticmethod(_new_version_counter)


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
        self._views = None
        self._view_kind = VIEW_DEFAULT


if not cython.compiled:  # tensors made without __init__ (gradviz_ext._ops.make_tensor) read these
    TensorBase._views = None
    TensorBase._view_kind = 0


# Note [Views after their base changed]
# -------------------------------------
# A view's ``grad_fn`` leads to its base's history as it was when the view was made. When the
# base (or another view of it) is then modified in place, the base's history gains a node,
# and PyTorch gives the view a new ``grad_fn`` the next time it is used: an
# ``AsStridedBackward0`` over the base's current history (gradviz.ops._inplace). Without that,
# the view's gradient would skip the in-place op: a wrong gradient, silently.
#
# PyTorch checks the version on every read of a view's ``grad_fn``. gradviz reads ``grad_fn``
# from C on every recorded op and adds no test there: instead a root base keeps weak
# references to its views that take part in autograd (``_views``, filled by ``track_view``
# when a view op runs), and the code that modifies a tensor in place renews the ``grad_fn`` of
# its base's live views right after the write (``refresh_views`` in gradviz.ops._inplace): one
# node per live view and write, where PyTorch makes one per view used after a write (a program
# that holds many views of a buffer while writing into it pays for each). A
# view made by a multi-output op (``split``, ``chunk``, ``unbind``) with grad mode on, made
# with grad mode off or in inference mode, or returned by a custom Function, cannot be renewed
# (PyTorch raises): it gets a node, ChangedViewError, that raises PyTorch's error when the
# view is used in an op or a backward pass reaches it, and that ``Tensor.grad_fn`` (a property
# over this C field, gradviz/_tensor.py) raises on reading, as PyTorch's does; the engine reads
# the field itself. ``_view_kind`` says which
# kind a view is,
# inherited by views of views as PyTorch propagates its CreationMeta.
# Compiled, the .pxd's cpdef enum makes them C constants and ints from Python.
if not cython.compiled:
    VIEW_DEFAULT = 0
    VIEW_NO_GRAD = 1         # made with grad mode off
    VIEW_MULTI_OUTPUT = 2    # an output of split/chunk/unbind made with grad mode on
    VIEW_INFERENCE_MODE = 3  # made in inference mode (Note [Inference mode])
    VIEW_CUSTOM_FUNCTION = 4  # a custom Function's output (Note [Wrapping outputs], autograd)


@cython.ccall
def track_view(root: TensorBase, view: TensorBase, parent: TensorBase, kind: cython.int):
    """Record that ``view`` (made from ``parent``, a view of ``root`` or ``root`` itself) is
    a view of ``root``, of ``kind`` (VIEW_DEFAULT: inherit ``parent``'s); Note [Views after
    their base changed]. Called once per output of a view op."""
    if not is_grad_enabled():
        kind = VIEW_INFERENCE_MODE if is_inference_mode_enabled() else VIEW_NO_GRAD
    elif kind == VIEW_DEFAULT:
        kind = parent._view_kind
    view._view_kind = kind
    if not (parent._requires_grad or parent.grad_fn is not None
            or root._requires_grad or root.grad_fn is not None):
        return  # no autograd history to keep up with
    ref = PyWeakref_NewRef(view, None)
    views = root._views
    if views is None:
        root._views = [ref]
        return
    known: list = views
    n: cython.Py_ssize_t = len(known)
    if n >= 16 and (n & (n - 1)) == 0:  # drop dead references at each power of two
        known[:] = [r for r in known if r() is not None]
    known.append(ref)


def live_views(root):
    """The live views of ``root`` recorded by ``track_view`` (dead references dropped)."""
    views = root._views
    if views is None:
        return []
    live = []
    refs = []
    for ref in views:
        view = ref()
        if view is not None:
            live.append(view)
            refs.append(ref)
    root._views = refs if refs else None
    return live


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


# Note [Rare node fields]
# ----------------------
# A node's hooks (pre, post, tensor pre), its metadata dict and its anomaly-mode forward site
# are None on nearly every node, yet five fields cost 40 bytes on each of a graph's nodes
# (Note [Compact nodes] in _ops.py). They live in one NodeExtras, made when the first of them
# is set; the node keeps a single field, ``_extra``, None until then. The five names stay
# attributes of the node (properties over ``_extra``), and the engine's hot loop tests
# ``_extra is None`` once per node instead of four fields.


@cython.cclass
class NodeExtras:
    """The rarely set fields of a Node (Note [Rare node fields])."""

    def __init__(self):
        self.pre_hooks = None
        self.post_hooks = None
        self.tensor_pre_hooks = None
        self.metadata = None
        self.forward_site = None


# Note [Inline edges]
# -------------------
# Most nodes have one or two edges. As a tuple of ``(node, input_nr)`` tuples they cost two
# or three GC-tracked tuples per recorded op (112 bytes for a chain's ``y * c``, more than a
# third of what one op keeps). So a node keeps its first two edges in fields (``_fn0``,
# ``_nr0``, ``_fn1``, ``_nr1``, with ``_edge_count``) and only a node with more than two
# keeps the tuple (``_edge_tuple``). ``next_functions`` builds the tuple on each read (as
# PyTorch's does: ``f.next_functions is f.next_functions`` is False there too) and its
# setter splits one; the engine reads the fields through ``_edge_node``/``_edge_nr``.
_NO_EDGE = (None, 0)


@cython.trashcan(True)  # freeing a 10^6-node chain must not recurse 10^6 deep in C
@cython.cclass
class Node:
    """A node of the backward graph (``grad_fn``).

    ``next_functions`` holds one ordered edge ``(node, input_nr)`` per tensor input of the
    forward operation; ``(None, 0)`` for an input that needs no gradient.
    """

    def __init__(self, next_functions=(), input_metadata=(), sequence_nr=-1):
        global _next_sequence_nr, _next_node_id
        self._set_edges(tuple(next_functions))
        self._input_metadata = tuple(input_metadata)
        if sequence_nr < 0:
            self._seq = _next_sequence_nr
            _next_sequence_nr += 1
        else:
            self._seq = sequence_nr
        self._id = _next_node_id
        _next_node_id += 1
        self._extra = None  # Note [Rare node fields]
        self._released = False
        # Note [Anomaly mode]: one flag test when anomaly mode is off
        if _anomaly_enabled:
            _extras(self).forward_site = capture_forward_site(current_graph_task())
        # Note [Forward scopes]: two C tests when no thread is inside a scope
        self._scope = None if _scope is None and not _thread_scopes else current_scope()

    # ---- the edges (Note [Inline edges]) ---------------------------------------------
    @property
    def next_functions(self):
        """One ``(node, input_nr)`` per tensor input of the forward, ``(None, 0)`` for an
        input that needs no gradient; built on each read for up to two edges, as PyTorch's."""
        edges = self._edge_tuple
        if edges is not None:
            return edges
        count: cython.int = self._edge_count
        if count == 0:
            return ()
        if count == 1:
            return ((self._fn0, self._nr0),)
        return ((self._fn0, self._nr0), (self._fn1, self._nr1))

    @next_functions.setter
    def next_functions(self, edges):
        self._set_edges(tuple(edges))

    @cython.cfunc
    def _set_edges(self, edges: tuple):
        count: cython.Py_ssize_t = len(edges)
        if count > 2:
            self._edge_tuple = edges
            self._fn0 = self._fn1 = None
            self._nr0 = self._nr1 = 0
        else:
            self._edge_tuple = None
            self._fn0, self._nr0 = edges[0] if count > 0 else _NO_EDGE
            self._fn1, self._nr1 = edges[1] if count > 1 else _NO_EDGE
        self._edge_count = count

    @cython.cfunc
    def _edge_node(self, index: cython.Py_ssize_t):
        """The node of edge ``index`` (None for an input that needs no gradient)."""
        edges = self._edge_tuple
        if edges is not None:
            return edges[index][0]
        if index == 0:
            return self._fn0
        if index == 1:
            return self._fn1
        return None  # a node the collector cleared (its count is left as it was)

    @cython.cfunc
    def _edge_nr(self, index: cython.Py_ssize_t) -> cython.Py_ssize_t:
        """The input slot of edge ``index`` in its node."""
        edges = self._edge_tuple
        if edges is not None:
            return edges[index][1]
        return self._nr0 if index == 0 else self._nr1

    # ---- the rare fields (Note [Rare node fields]) -----------------------------------
    @property
    def _pre_hooks(self):
        return None if self._extra is None else self._extra.pre_hooks

    @_pre_hooks.setter
    def _pre_hooks(self, value):
        if value is not None or self._extra is not None:
            _extras(self).pre_hooks = value

    @property
    def _post_hooks(self):
        return None if self._extra is None else self._extra.post_hooks

    @_post_hooks.setter
    def _post_hooks(self, value):
        if value is not None or self._extra is not None:
            _extras(self).post_hooks = value

    @property
    def _tensor_pre_hooks(self):
        return None if self._extra is None else self._extra.tensor_pre_hooks

    @_tensor_pre_hooks.setter
    def _tensor_pre_hooks(self, value):
        if value is not None or self._extra is not None:
            _extras(self).tensor_pre_hooks = value

    @property
    def _metadata(self):
        return None if self._extra is None else self._extra.metadata

    @_metadata.setter
    def _metadata(self, value):
        if value is not None or self._extra is not None:
            _extras(self).metadata = value

    @property
    def _forward_site(self):
        return None if self._extra is None else self._extra.forward_site

    @_forward_site.setter
    def _forward_site(self, value):
        if value is not None or self._extra is not None:
            _extras(self).forward_site = value

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
        """A dict for the user's data. Under anomaly mode PyTorch's ``'traceback_'`` (the
        forward call's stack, ``traceback.format_stack()``-style strings, outermost first) and,
        for a node made by a backward under ``create_graph``, ``'parent_'`` (that node)."""
        if self._metadata is None:
            self._metadata = {}
            site = self._forward_site
            if site is not None:  # Note [Anomaly mode]: made on first access, not per node
                self._metadata["traceback_"] = site.stack()
                if site.parent is not None:
                    self._metadata["parent_"] = site.parent
        return self._metadata

    @property
    def num_inputs(self):
        return len(self._input_metadata)

    def input_metadata(self, slot):
        return self._input_metadata[slot]

    def __repr__(self):
        return f"<{display_name(self)} object at {hex(id(self))}>"

    def __reduce__(self):
        # PyTorch's nodes refuse copy, deepcopy and pickle alike
        raise TypeError(f"cannot pickle '{type(self).__name__}' object")

    # ---- behaviour, overridden by subclasses ---------------------------------------
    def _apply_grads(self, grads):
        raise NotImplementedError(f"{self.name()} does not implement _apply_grads")

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
            self._post_hooks = HookList()
        self._post_hooks.append(fn)
        return RemovableHandle(self._post_hooks, fn)

    def register_prehook(self, fn):
        """Register ``fn(grad_outputs)`` to run before this node's backward."""
        if self._pre_hooks is None:
            self._pre_hooks = HookList()
        self._pre_hooks.append(fn)
        return RemovableHandle(self._pre_hooks, fn)

    def _register_tensor_pre_hook(self, slot, fn):
        if self._tensor_pre_hooks is None:
            self._tensor_pre_hooks = {}
        hooks = self._tensor_pre_hooks.get(slot)
        if hooks is None:
            hooks = HookList()
            self._tensor_pre_hooks[slot] = hooks
        hooks.append(fn)
        return RemovableHandle(hooks, fn)


if not cython.compiled:  # a node made by __new__ alone has no edges, as a compiled one
    Node._fn0 = Node._fn1 = Node._edge_tuple = None
    Node._nr0 = Node._nr1 = Node._edge_count = 0


@cython.cfunc
def _extras(node: Node) -> NodeExtras:
    """``node``'s NodeExtras, made on first use."""
    if node._extra is None:
        node._extra = NodeExtras()
    return node._extra


def check_node_call_arguments(node, grads):
    """What PyTorch checks when a node is called directly (``grad_fn(*grads)``): one
    argument per output of the forward, each a tensor or None."""
    expected = len(node._input_metadata)
    if len(grads) != expected:
        raise TypeError(f"expected {expected} arguments, got {len(grads)} instead")
    for index, grad in enumerate(grads):
        if grad is not None and not isinstance(grad, TensorBase):
            raise TypeError(f"argument {index} is not a Variable")


@cython.ccall
def init_node(node: Node, next_functions: tuple, input_metadata: tuple):
    """Initialize a node made with ``__new__`` (the fast path of gradviz_ext._ops)."""
    node._set_edges(next_functions)
    _init_node_rest(node, input_metadata)


@cython.cfunc
def init_node_edges(node: Node, count: cython.int, fn0, nr0: cython.int, fn1, nr1: cython.int,
                    input_metadata: tuple):
    """``init_node`` with at most two edges given as their parts (Note [Inline edges])."""
    node._edge_tuple = None
    node._fn0 = fn0
    node._nr0 = nr0
    node._fn1 = fn1
    node._nr1 = nr1
    node._edge_count = count
    _init_node_rest(node, input_metadata)


@cython.cfunc
def _init_node_rest(node: Node, input_metadata: tuple):
    global _next_sequence_nr, _next_node_id
    node._input_metadata = input_metadata
    node._seq = _next_sequence_nr
    _next_sequence_nr += 1
    node._id = _next_node_id
    _next_node_id += 1
    node._extra = None  # Note [Rare node fields]
    node._released = False
    # Note [Anomaly mode]: one flag test when anomaly mode is off
    if _anomaly_enabled:
        _extras(node).forward_site = capture_forward_site(current_graph_task())
    # Note [Forward scopes]: two C tests when no thread is inside a scope
    node._scope = None if _scope is None and not _thread_scopes else current_scope()


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

    def name(self):
        return "torch::autograd::AccumulateGrad"  # PyTorch's C++ nodes give qualified names

    def _kind(self):
        return "accumulate_grad"

    def _apply_grads(self, grads):
        # The engine calls _accumulate instead (it needs the task for ownership and events).
        return ()

    def __call__(self, *grads):
        """``acc(grad)``, as PyTorch's: add ``grad`` to the leaf's ``.grad`` (in place with
        grad mode off, out of place and recorded with it on), run the leaf's
        post-accumulate-grad hooks, return ``()``. The leaf's tensor hooks do not run: the
        engine runs those."""
        check_node_call_arguments(self, grads)
        grad = grads[0]
        leaf: TensorBase = self.variable
        before = leaf.grad
        if grad is None:
            pass  # the hooks still run, as in PyTorch
        elif is_grad_enabled():
            leaf.grad = _rt.clone(grad) if before is None else _rt.add(before, grad)
        elif before is None:
            leaf.grad = _rt.detach(_rt.clone(grad))
        else:
            _rt.add_inplace(before, grad)
        hooks = leaf._post_accumulate_hooks
        if hooks is not None:
            for hook in list(hooks):
                hook(self.variable)
        return ()


# PyTorch's AccumulateGrad is a C++ node type named without a module (type(node).__module__
# is 'builtins'); the C type's tp_name compiled, __module__ interpreted. Nothing here pickles
# nodes or finds their class by module.
if cython.compiled:
    gradviz_name_accumulate_grad(AccumulateGrad)
else:
    AccumulateGrad.__module__ = "builtins"


class GraphRoot(Node):
    """Feeds the initial gradients of several roots into the graph."""

    def __init__(self, edges, grads):
        Node.__init__(self, edges, (), ACCUMULATE_GRAD_SEQUENCE_NR)
        self.grads = list(grads)

    def name(self):
        return "torch::autograd::GraphRoot"

    def _apply_grads(self, grads):
        return self.grads


class ChangedViewError(Node):
    """The ``grad_fn`` of a view that PyTorch refuses to use after its base changed (made by a
    multi-output op, or with grad mode off): using the view in an op (``gradient_edge``) or
    a backward pass that reaches the node raises PyTorch's error (Note [Views after their
    base changed]). Named "Error" after PyTorch's node of that purpose."""

    def __init__(self, view, message):
        node = view.grad_fn
        name = None if node is None else short_node_name(node.name())
        Node.__init__(self, (), (InputMeta(view._data.shape, view.dtype),))
        self.message = message
        self.view_node_name = name
        self.view_output_nr = view._output_nr

    def name(self):
        return "Error"

    def _apply_grads(self, grads):
        raise RuntimeError(self.message)


_changed_view_type = ChangedViewError  # compared by identity in gradient_edge


@cython.ccall
def stored_grad_fn(tensor: TensorBase):
    """``tensor``'s node as stored, a ChangedViewError included (``Tensor.grad_fn`` raises
    for that one, as PyTorch's does): for gradviz's own code that handles such views."""
    if cython.compiled:
        return tensor.grad_fn
    return tensor.__dict__.get("grad_fn")  # interpreted: the field Tensor.grad_fn wraps


@cython.ccall
def gradient_edge(tensor: TensorBase):
    """The edge a gradient for ``tensor`` flows into: ``(grad_fn, output_nr)`` for a
    non-leaf, ``(AccumulateGrad, 0)`` for a leaf that requires grad, else ``(None, 0)``.
    Raises PyTorch's error for a view that cannot be used since its base changed."""
    fn = tensor.grad_fn
    if fn is not None:
        if type(fn) is _changed_view_type:  # PyTorch raises on reading such a view's grad_fn
            raise RuntimeError(fn.message)
        return (fn, tensor._output_nr)
    if tensor._requires_grad:
        return (grad_accumulator(tensor), 0)
    return (None, 0)


@cython.ccall
def edge_node(tensor: TensorBase):
    """``gradient_edge(tensor)[0]`` without building the edge; the edge's input_nr is
    ``tensor._output_nr`` when ``tensor.grad_fn`` is set, else 0."""
    fn = tensor.grad_fn
    if fn is not None:
        if type(fn) is _changed_view_type:
            raise RuntimeError(fn.message)
        return fn
    if tensor._requires_grad:
        return grad_accumulator(tensor)
    return None


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
        counter: VersionCounter = tensor._version_counter
        if counter.inference:  # Note [Inference tensors]
            raise RuntimeError(INFERENCE_SAVED_MESSAGE)
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

    def register_hooks(self, pack_hook, unpack_hook):
        """PyTorch's ``SavedTensor.register_hooks`` (``grad_fn._raw_saved_self``): pack the
        saved tensor now with ``pack_hook``, and unpack it with ``unpack_hook`` whenever it is
        read (by backward, or ``grad_fn._saved_self``), as under ``saved_tensors_hooks``."""
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError(
                "register_hooks(): incompatible function arguments. Expected two callables "
                f"(pack_hook, unpack_hook), got {type(pack_hook).__name__} and "
                f"{type(unpack_hook).__name__}")
        if self._has_hooks:
            freed = self._unpack_hook is None  # release() drops the hooks' values
        else:
            freed = self._tensor is None and self._data is None
        if freed:
            raise RuntimeError(
                "Calling register_hooks on a saved tensor after it has been freed. Saved "
                "intermediate values of the graph are freed when you call .backward() or "
                "autograd.grad(). Specify retain_graph=True if you need to backward through the "
                "graph a second time or if you need to access saved variables after calling "
                "backward.")
        if self._has_hooks:
            raise RuntimeError(
                "Calling register_hooks on a saved tensor whose hooks have already been set. "
                "Hint: only one pair of hooks is allowed at a time.")
        if self._tensor is not None:
            tensor = self._tensor
        else:  # an output is kept as its array (no reference cycle through its grad_fn)
            tensor = _rt.make(self._data, False, None, self._output_nr, self._version_counter)
        self._grad_fn = None if self._is_output else tensor.grad_fn
        self._grad_accumulator = None if self._is_output else tensor._grad_accumulator
        self._packed = pack_hook(tensor)
        self._unpack_hook = unpack_hook
        self._has_hooks = True
        self._tensor = None
        self._data = None

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
            raise RuntimeError(self._modified_message(node, current))
        if self._tensor is not None:
            return self._tensor
        grad_fn = node if self._requires_grad else None
        return _rt.make(self._data, False, grad_fn, self._output_nr, self._version_counter)

    def _modified_message(self, node, current):
        """PyTorch's words for a saved tensor modified in place: the tensor, the node whose
        output it is (the saving node for an output, else its current ``grad_fn``; nothing
        for a leaf), and the hint (which differs under anomaly mode)."""
        if self._is_output:
            owner = node
        elif self._tensor.grad_fn is not None:
            owner = self._tensor.grad_fn
        else:
            owner = None
        what = ""
        if owner is not None:
            nr = self._output_nr if self._is_output else self._tensor._output_nr
            what = f", which is output {nr} of {short_node_name(owner.name())},"
        shown = _rt.describe(self._tensor if self._tensor is not None else self._data)
        if _anomaly_enabled:
            hint = ("Hint: the backtrace further above shows the operation that failed to compute "
                    "its gradient. The variable in question was changed in there or anywhere "
                    "later. Good luck!")
        else:
            hint = ("Hint: enable anomaly detection to find the operation that failed to compute "
                    "its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).")
        return ("one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: {shown}{what} is at version {current}; expected version "
                f"{self._saved_version} instead. {hint}")

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
        task = current_graph_task()
        if task is not None and task._listener is not None:
            task._listener.saved_unpacked(task, node, self, self._unpack_hook)
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


_CPP_PREFIX = "torch::autograd::"


def display_name(node):
    """``node.name()`` without the namespace of PyTorch's C++ nodes: ``AccumulateGrad`` for
    ``torch::autograd::AccumulateGrad``, as traces, the widget and tensors' repr show it."""
    name = node.name()
    return name[len(_CPP_PREFIX):] if name.startswith(_CPP_PREFIX) else name


def short_node_name(name):
    """A node's name as PyTorch's errors print it: ``TanhBackward0`` is ``Tanh``,
    ``PowBackward1`` is ``Pow1``, a custom ``FBackward`` is ``F``."""
    if name.endswith("Backward0"):
        return name[:-len("Backward0")]
    # only the suffix: a custom BackwardHookFunctionBackward is BackwardHookFunction
    stem = name.rstrip("0123456789")
    if stem.endswith("Backward"):
        return stem[:-len("Backward")] + name[len(stem):]
    return name


@cython.ccall
def save_tensor(tensor: TensorBase, is_output: cython.bint) -> SavedTensor:
    """``SavedTensor(tensor, is_output)`` without a Python-level constructor call."""
    saved: SavedTensor = SavedTensor.__new__(SavedTensor)
    saved._init(tensor, is_output)
    return saved


# --------------------------------------------------------------------------------------
# Observers
# --------------------------------------------------------------------------------------


# the callbacks of a backward pass, in Observer's order
BACKWARD_CALLBACKS = (
    "backward_started", "node_ready", "buffer_added", "node_started", "prehook",
    "grads_materialized", "grad_cast", "grad_reduced", "posthook", "node_finished",
    "grad_accumulated", "saved_released", "backward_finished", "error", "buffers_exposed",
    "saved_unpacked",
)


class Observer:
    """Receives the engine's events. Override the kinds you need; the rest do nothing.

    The engine calls these with live objects (nodes, tensors); turning them into event
    records is the observer's job (gradviz.instrument), so an engine without observers
    builds nothing.
    """

    # Note [Records the engine appends] (_task.py): a deferring recorder's EventLog, where the
    # engine appends the records of its commonest events instead of calling their methods
    _engine_log = None

    def backward_started(self, task): pass
    def node_ready(self, task, node): pass
    # ``grad`` is the contribution, ``buffered`` the slot's sum right after adding it
    def buffer_added(self, task, node, slot, producer, how, grad, buffered): pass
    def node_started(self, task, node, grads): pass
    # ``before`` is a copy taken before the hook ran (Note [Observed values], _task.py);
    # slot >= 0: a tensor pre-hook of that input (tensors); -1: a node pre-hook (lists)
    def prehook(self, task, node, hook, slot, before, after, replaced): pass
    def grads_materialized(self, task, node, slots): pass
    def grad_cast(self, task, node, slot, from_dtype, to_dtype): pass
    def grad_reduced(self, task, node, slot, from_shape, to_shape): pass
    # ``before``: copies of the node's results before this hook ran
    def posthook(self, task, node, hook, grad_inputs, grad_outputs, replaced, before): pass
    def node_finished(self, task, node, grads_in, grads_out, duration): pass
    # ``before``: a copy of the leaf's .grad before the update (None if it had none)
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
_running_task = None  # the owner thread's; other threads' are in _thread_tasks
_thread_tasks = {}
_anomaly_enabled = False


@cython.ccall
def current_graph_task():
    """The graph task whose ``step()`` is running a node right now (innermost), or None.

    ``task.current`` is that node. A custom backward that starts its own backward pass
    nests a task; when that inner task finishes, the outer one is current again. Per thread,
    like grad mode (Note [Per-thread grad mode]): a backward running in another thread is not
    this thread's.
    """
    ident = _thread_ident()
    if ident == _owner_thread:
        return _running_task
    return _thread_tasks.get(ident)


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


@cython.ccall
def set_current_graph_task(task):
    """Make ``task`` the running graph task (``GraphTask.step`` brackets each node with this);
    returns the previous one."""
    global _running_task
    ident = _thread_ident()
    if ident == _owner_thread:
        previous = _running_task
        _running_task = task
        return previous
    previous = _thread_tasks.get(ident)
    if task is None:
        _thread_tasks.pop(ident, None)
    else:
        _thread_tasks[ident] = task
    return previous


# Note [Forward scopes]
# ---------------------
# While a ``gradviz.nn.Module``'s forward (or a ``gradviz.debug.scope`` block) runs, the
# thread's *current scope* is a :class:`ScopeFrame` (``push_scope``); every node created
# meanwhile keeps it in ``Node._scope``, so a debugger reading the graph later knows which
# module call built each node. The engine never looks inside a frame: ``gradviz.autograd.
# _scopes`` names them (Note [Module paths] there).
# Like the running task (Note [Per-thread grad mode]), the owner thread's scope is a C global
# and other threads' live in ``_thread_scopes`` (only while set), so creating a node outside
# every scope costs two C tests.
_scope = None
_thread_scopes = {}


@cython.ccall
def current_scope():
    """This thread's current scope object (Note [Forward scopes]), or None."""
    ident = _thread_ident()
    if ident == _owner_thread:
        return _scope
    return _thread_scopes.get(ident)


@cython.ccall
def set_current_scope(scope):
    """Make ``scope`` this thread's current scope (None: no scope); returns the previous one.
    The caller restores the previous one when its block ends (Note [Forward scopes])."""
    global _scope
    ident = _thread_ident()
    if ident == _owner_thread:
        previous = _scope
        _scope = scope
        return previous
    previous = _thread_scopes.get(ident)
    if scope is None:
        _thread_scopes.pop(ident, None)
    else:
        _thread_scopes[ident] = scope
    return previous


@cython.cclass
class ScopeFrame:
    """One module call or one ``scope`` block (Note [Forward scopes]): the enclosing frame,
    the module (None for a block) and the block's label. ``resolved`` is left to the layer
    that names frames (``gradviz.autograd._scopes``); the engine never reads any of it.
    A module's frame also lists, in ``calls``, the modules called inside its call (directly,
    or inside a ``scope`` block of it), each followed by the sequence number the next node
    would get when it was called: ``[module, number, module, number, ...]`` (None until one
    is; it lives as long as the frame, one forward or one graph): the doctor names a module
    that ran but whose output was cut before the loss (Note [Modules cut off upstream] in
    ``gradviz/debug/_model_checks.py``). ``sequence`` is that number for the frame's own
    call; calls with no module around them go to :func:`top_module_calls`."""

    def __init__(self, parent, module, label=None):
        self.parent = parent
        self.module = module
        self.label = label
        self.resolved = None
        self.calls = None
        self.sequence = _next_sequence_nr


# The last module calls made with no module call around them, oldest first, as
# (weak reference to the module, sequence number); bounded, so a long training loop keeps
# only its latest forwards (Note [Modules cut off upstream]).
_top_calls = collections.deque(maxlen=512)


def top_module_calls():
    """``[(module, sequence number)]`` of the latest module calls made outside every other
    module call (oldest first; modules since collected are left out)."""
    found = []
    for reference, sequence in list(_top_calls):
        module = reference()
        if module is not None:
            found.append((module, sequence))
    return found


@cython.ccall
def push_scope(module, label=None):
    """Make a new :class:`ScopeFrame` (inside the current one) this thread's current scope and
    return the previous scope, which the caller restores with :func:`set_current_scope` when
    its block ends. One C call per module call (Note [Forward scopes]); a module call is
    also noted in the enclosing frame's ``calls``."""
    parent = current_scope()
    if module is not None and isinstance(parent, ScopeFrame):
        # noted in the nearest module's frame: a scope block (a frame without a module) may
        # last a whole training loop, a module's frame one forward
        owner: ScopeFrame = parent
        while owner.module is None and isinstance(owner.parent, ScopeFrame):
            owner = owner.parent
        if owner.module is not None:
            if owner.calls is None:
                owner.calls = [module, _next_sequence_nr]
            else:
                owner.calls.append(module)
                owner.calls.append(_next_sequence_nr)
            return set_current_scope(ScopeFrame(parent, module, label))
    if module is not None:
        try:
            _top_calls.append((weakref.ref(module), _next_sequence_nr))
        except TypeError:  # a module object that takes no weak reference
            pass
    return set_current_scope(ScopeFrame(parent, module, label))


@cython.ccall
def is_anomaly_enabled():
    return _anomaly_enabled


@cython.ccall
def is_anomaly_check_nan_enabled():
    return _anomaly_check_nan


_anomaly_check_nan = True  # Note [Anomaly mode] in gradviz_ext/_anomaly.py


@cython.ccall
def default_observer():
    """The observer new graph tasks report to, or None."""
    return _default_observer


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


def compiled():
    """True when this module runs as a compiled extension."""
    return cython.compiled


def source_path():
    return os.path.abspath(__file__)
