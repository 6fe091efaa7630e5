# cython: language_level=3
"""Recording built-in ops: the one code path that turns an op into a graph node.

``OpSpec`` is what the engine knows of an op (``gradviz.ops.Op`` subclasses it and adds the
table). ``apply_op`` runs the op's forward rule on numpy arrays, wraps the results and, when
grad mode is on and an input requires grad, records an ``OpNode`` whose ``_apply_grads`` calls the
op's backward rule. Like ``_engine.py`` this file is Cython pure-Python mode: ``_ops.pxd``
compiles it; ``GRADVIZ_PURE_PYTHON=1`` runs it interpreted.

Note [Op fast paths]
--------------------
Small tensors make per-op overhead dominate, so ``apply_op`` avoids generic work where it
can: the common dtype rules ("promote", "promote to float") are decided in C when all tensor
operands share a dtype; tensors and nodes are built without going through ``__init__``;
numpy's floating-point error state is silenced through its context variable (a quarter of
``np.errstate``'s cost), and only for ops marked ``quiet``.
"""

import os
import warnings

import numpy as np

import cython

from gradviz_ext import _engine
from gradviz_ext._errstate import ERRSTATE, QUIET, quiet_context

if not cython.compiled:  # compiled, these come from the cimport in _ops.pxd
    from gradviz_ext._engine import (InputMeta, Node, SavedTensor, TensorBase, VersionCounter,
                                     edge_node, forward_observer, gradient_edge, init_node,
                                     init_node_edges,
                                     is_grad_enabled, save_tensor, track_view)

# numpy's error state as a context variable (gradviz_ext/_errstate.py, Note [Op fast paths])
_errstate_var = ERRSTATE
_errstate_quiet = QUIET
_quiet_context = quiet_context()

# The op's dtype rule (OpSpec.dtype_rule) and kernel (below). Compiled, the .pxd declares both
# as ``cpdef enum``s: C constants in the hot paths (a module global would cost a dict lookup and
# an int object per comparison), ints from Python; interpreted, these assignments make them.
if not cython.compiled:
    DTYPE_NONE = 0
    DTYPE_PROMOTE = 1
    DTYPE_PROMOTE_FLOAT = 2
    DTYPE_CUSTOM = 3

# Note [Compiled kernels]
# -----------------------
# The five arithmetic ops of nearly every program (add and sub without alpha, mul, div, neg)
# also name a kernel: apply_op calls their numpy ufunc directly instead of the op's Python
# forward, and OpNode computes their fast backward here instead of calling the Python rule.
# A kernel is the same numpy calls in the same order as the rules it stands for, so results
# are bit-identical (tests/ops/test_fast_backward.py runs both); anything a kernel does not
# cover (alpha != 1, a missing gradient, a shape error's message) goes to the Python rules.
if not cython.compiled:  # compiled: the .pxd's cpdef enum (above)
    KERNEL_NONE = 0
    KERNEL_ADD = 1
    KERNEL_SUB = 2
    KERNEL_MUL = 3
    KERNEL_DIV = 4
    KERNEL_NEG = 5
_ALPHA_ONE = {"alpha": 1}  # shared, never mutated: the attrs of add/sub without alpha
_np_add = np.add
_np_subtract = np.subtract
_np_multiply = np.multiply
_np_divide = np.true_divide
_np_negative = np.negative

_KIND_CATEGORY = {"b": 0, "i": 1, "u": 1, "f": 2}

# numpy dtype -> gradviz dtype, and the Tensor class; installed by gradviz at import
_dtypes_by_numpy = {}
_tensor_class = None

# Note [Forward AD hook]: while a dual level is active, gradviz.autograd._forward_ad_impl
# sets this to its ``propagate(op, inputs, attrs, outputs)``, which gives the outputs their
# tangents. None otherwise, so apply_op pays one test when nobody uses forward-mode AD.
_forward_ad = None


# Note [Saved names]: ``grad_fn._saved_<name>`` / ``_raw_saved_<name>`` as PyTorch names them;
# gradviz.ops._saved installs its lookup here. Only ``__getattr__`` (missing attributes) and
# ``__dir__`` read these, never the recording or backward paths.
_saved_attribute = None
_saved_names = None


def install_saved_attributes(lookup, names):
    """Give OpNode the table of PyTorch's saved names: ``lookup(node, name)`` answers
    ``node._saved_<x>`` and ``node._raw_saved_<x>``, ``names(node, attributes)`` is dir()'s list."""
    global _saved_attribute, _saved_names
    _saved_attribute = lookup
    _saved_names = names


def install(tensor_class, dtypes_by_numpy):
    """Give this module the Tensor class and the numpy-to-gradviz dtype table."""
    global _tensor_class, _dtypes_by_numpy
    _tensor_class = tensor_class
    _dtypes_by_numpy = dtypes_by_numpy


class OpSpec:
    """The engine's view of a differentiable op (see ``gradviz.ops.Op``)."""

    def __init__(self, name, node, forward, backward, saves, dtype, dtype_rule, view, quiet,
                 fast_backward=None, kernel=KERNEL_NONE, fills_missing=False):
        if kernel != KERNEL_NONE and fast_backward is None:
            raise ValueError(f"op {name!r}: a kernel stands for a fast_backward, which is missing")
        self.kernel = kernel
        self.fills_missing = fills_missing
        self._saves_cache = None
        self.name = name
        self.node = node
        self.node_class = node_class(node)
        self.forward = forward
        self.backward = backward
        self.fast_backward = fast_backward
        self.saves = saves
        self.dtype = dtype
        self.dtype_rule = dtype_rule
        self.view = view
        self.quiet = quiet


# Note [Empty tensors' strides]
# -----------------------------
# numpy gives every new array of no elements all-zero strides (``np.empty((2, 0, 4))``, and
# so the result of any op on empty operands, matmul's included, has strides (0, 0, 0)), where
# PyTorch gives a new tensor the contiguous strides of its shape, a size 0 counting as 1:
# (2, 0, 4) has strides (4, 4, 1). The strides show in ``stride()``, in the nodes'
# ``_saved_*_strides``, and in the views of the tensor, which derive theirs from it. So
# ``make_tensor``, which makes every tensor from an op's result, a gradient or a factory's
# array, gives such an array PyTorch's strides (a view of the same no elements; the test is a
# C loop over the strides that stops at the first nonzero one, ``ndarray_head.h``). A view
# op's result keeps the strides numpy derived from its base's (``_tensor_around``): they are
# the base's, and all zero only where PyTorch's are too (``torch.ones(1).expand(0)``).
# PyTorch counts every empty tensor as dense, so it keeps an empty tensor's strides, whatever
# they are, where it keeps a dense tensor's layout: ``clone`` and the ``*_like`` constructors
# (``with_strides_of`` in gradviz/_memory_format.py), a leaf's first ``.grad`` (``_task.py``,
# ``_empty_in_layout_of``), and its conversions of a numpy array or a tensor (``tensor``,
# ``from_numpy``, ``as_tensor``, ``Tensor``: ``_wrap_converted`` in gradviz/_tensor.py), which
# keep even numpy's all-zero strides. Of those, only a copy of an all-zero-strided tensor
# differs: it gets a new tensor's strides, where PyTorch keeps the zeros.
@cython.ccall
def strided_like_torch(data):
    """``data``, or for an array of no elements laid out as numpy lays out a new one (all
    strides 0), the same array with the strides PyTorch gives a new tensor of its shape
    (Note [Empty tensors' strides])."""
    if cython.compiled:
        if not gradviz_array_unstrided_empty(data, _ndarray):
            return data
    elif type(data) is not _ndarray or data.size or not data.ndim or any(data.strides):
        return data
    return _torch_strides(data)


@cython.cfunc
def _torch_strides(data):
    """``data`` (an array of no elements) with the strides PyTorch gives a new tensor of its
    shape."""
    strides = []
    step = data.itemsize
    for size in reversed(data.shape):
        strides.append(step)
        step *= max(size, 1)
    return np.lib.stride_tricks.as_strided(data, data.shape, tuple(reversed(strides)))


@cython.ccall
def make_tensor(data):
    """A Tensor around ``data`` (not copied), built without calling ``__init__``; an array of
    no elements numpy made gets PyTorch's strides (Note [Empty tensors' strides])."""
    if cython.compiled:  # the test inline: every op's every result passes here
        if gradviz_array_unstrided_empty(data, _ndarray):
            data = _torch_strides(data)
        return _tensor_around(data)
    return _tensor_around(strided_like_torch(data))


def make_tensor_as_laid_out(data):
    """``make_tensor`` keeping the strides of an array of no elements as they are: an array
    converted from a user's (``torch.from_numpy`` and ``torch.tensor`` keep a numpy array's
    strides, all zero or not)."""
    return _tensor_around(data)


@cython.cfunc
@cython.inline
def _tensor_around(data):
    """A Tensor around ``data`` as it is (not copied), built without calling ``__init__``."""
    t: TensorBase
    if cython.compiled:  # the class's tp_new directly: no attribute lookup, no Python call
        t = cython.cast(TensorBase, gradviz_new_instance(_tensor_class))
        # tp_new left every other field None, False or 0
    else:
        t = TensorBase.__new__(_tensor_class)
        t._requires_grad = False
        t.grad_fn = None
        t._output_nr = 0
        t.grad = None
        t._base = None
        t._grad_accumulator = None
        t._retains_grad = False
        t._hooks = None
        t._post_accumulate_hooks = None
    t._data = data
    counter: VersionCounter = VersionCounter.__new__(VersionCounter)
    counter.value = 0
    t._version_counter = counter
    return t


@cython.cfunc
@cython.inline
def _stored_node(t: TensorBase):
    """``t.grad_fn`` as stored. Compiled, the C field; interpreted, read past the property
    ``Tensor.grad_fn`` (which raises for a view whose base changed, as PyTorch's getter does,
    where the engine's own reads do not)."""
    if cython.compiled:
        return t.grad_fn
    return t.__dict__.get("grad_fn")


# Note [Views' requires_grad]
# ---------------------------
# As in PyTorch, a view requires grad when it has a grad_fn, its own flag is set, or its root
# base requires grad. The last case is a view without a node: made with grad mode off
# (``with no_grad(): v = x[:2]``) or before its base was set to require grad. Such a view is a
# leaf (``is_leaf``, no ``grad_fn``) that ops record (``v * 2`` has a node and requires grad),
# but it has no edge of its own (``gradient_edge`` gives ``(None, 0)``: no AccumulateGrad, as
# its own flag is off), so no gradient reaches it or its base. The flag follows the base:
# ``x.requires_grad_(False)`` turns it off.
@cython.cfunc
@cython.inline
def _is_tensor(x) -> cython.bint:
    """``isinstance(x, TensorBase)``, gradviz.Tensor first: Cython's isinstance of a subclass
    walks its MRO, several times per op (then ``cython.cast(TensorBase, x)`` skips the same
    walk that a checked assignment would make)."""
    return type(x) is _tensor_class or isinstance(x, TensorBase)


@cython.ccall
def requires_grad(x) -> cython.bint:
    """Whether ``x`` is a tensor that takes part in autograd (shared by the ops layer)."""
    if not _is_tensor(x):
        return False
    t: TensorBase = cython.cast(TensorBase, x)
    if t._requires_grad or _stored_node(t) is not None:
        return True
    return t._base is not None and _base_requires_grad(t._base)


@cython.cfunc
def _base_requires_grad(base) -> cython.bint:
    """Note [Views' requires_grad]: a view also requires grad when its (root) base does."""
    b: TensorBase = base
    return b._requires_grad or b.grad_fn is not None


@cython.cfunc
def _scalar_category(value) -> cython.int:
    kind = type(value)  # the exact types first: one comparison for the usual number
    if kind is float:
        return 2
    if kind is int:
        return 1
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return 1
    if isinstance(value, float):
        return 2
    return -1  # anything else: let the Python rule decide


def _dtype_of(data):
    """``data.dtype``, read off the array when it is an exact ndarray (compiled)."""
    if cython.compiled:
        return gradviz_array_dtype(data, _ndarray)
    return data.dtype


def _has_shape(data, shape: tuple) -> cython.bint:
    """``data.shape == shape``, read off the array when it is an exact ndarray (compiled):
    no shape tuple is built."""
    if cython.compiled:
        same: cython.int = gradviz_array_has_shape(data, _ndarray, shape)
        if same >= 0:
            return same == 1
    return data.shape == shape


@cython.cfunc
def _fast_target(inputs: tuple, rule: cython.int):
    """The dtype every tensor operand already has when that is the result dtype (then no
    conversion is needed), or False: "ask the op's dtype rule"."""
    common = None
    t: TensorBase
    for x in inputs:
        if _is_tensor(x):
            t = cython.cast(TensorBase, x)
            dt = _dtype_of(t._data)
            if common is None:
                common = dt
            elif dt is not common and dt != common:
                return False
    if common is None:
        return False
    category: cython.int
    if common is _F32 or common is _F64:
        category = 2
    else:
        category = _KIND_CATEGORY.get(common.kind, -1)
        if category < 0:
            return False
    scalar: cython.int
    for x in inputs:
        if not _is_tensor(x):
            scalar = _scalar_category(x)
            if scalar < 0 or scalar > category:
                return False
    if rule == DTYPE_PROMOTE_FLOAT and category != 2:
        return False
    return common


# Note [Scalar operands]: numpy 2 handles a Python float or int operand (a "weak" scalar,
# NEP 50) through a slow path that costs more than the arithmetic on a small array. Converted
# once to a read-only 0-d array of the op's float dtype, the same value computes the same
# result in half the time (only for a float result: int and bool tensors keep numpy's own
# rules, overflow errors included). Conversions are cached per dtype, and made only for a
# number seen before (a constant used once is cheaper as it is); zeros are never cached
# (0.0 == -0.0, yet the sign matters) and neither is NaN (never equal to itself).
_ndarray = np.ndarray
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_F16 = np.dtype(np.float16)
_scalars_f32 = {}
_scalars_f64 = {}
_SCALAR_CACHE_SIZE = 4096
_SEEN_ONCE = object()
_recent_scalars = [None] * 32  # (number, dtype, array) by the number's address


def _scalar_array(value, dtype):
    """``value`` (a Python float or int) as a read-only 0-d array of ``dtype`` (float32 or
    float64); any other value or dtype is returned unchanged."""
    if dtype is _F32:
        cache = _scalars_f32
    elif dtype is _F64:
        cache = _scalars_f64
    else:
        return value
    kind = type(value)
    if kind is not float and kind is not int:
        return value
    # the same constant object in a loop (``y * 1.0001``): found by identity, no hashing
    slot: cython.Py_ssize_t
    if cython.compiled:
        slot = (cython.cast(cython.size_t, cython.cast(cython.p_void, value)) >> 4) & 31
    else:
        slot = (id(value) >> 4) & 31
    recent = _recent_scalars[slot]
    if recent is not None:
        entry: tuple = recent
        if entry[0] is value and entry[1] is dtype:
            return entry[2]
    cached = cache.get(value)
    if cached is not None:
        if cached is not _SEEN_ONCE:
            _recent_scalars[slot] = (value, dtype, cached)  # holds value: its id stays its own
            return cached
    elif value != 0.0 and value == value:
        # first sighting: converting costs more than it saves on one use, so numpy gets
        # the number itself (same result) and the array is made if the number comes back
        if len(cache) >= _SCALAR_CACHE_SIZE:
            cache.clear()
        cache[value] = _SEEN_ONCE
        return value
    array = np.array(value, dtype=dtype)
    array.flags.writeable = False
    if cached is _SEEN_ONCE:
        cache[value] = array
    return array


# Note [Rules that fill missing gradients]
# ----------------------------------------
# The engine replaces a missing incoming gradient by zeros before a built-in node's backward
# (Note [Engine order], step 2). A node of split, chunk or unbind has one output per piece,
# and a program often reads a few of many pieces (``x.unbind()[0]``): that was one zeros
# Tensor, array and ``grads_materialized`` slot per unused piece, made to be concatenated.
# PyTorch's formulas for these nodes take undefined gradients and fill them themselves. Ops
# declared ``fills_missing`` do the same: ``OpNode._materializes_grads`` is False for them,
# their Python and fast rules receive None and fill zeros (``_with_zeros`` and
# ``_with_zeros_fast`` in gradviz/ops/_shape.py), and no event reports a materialization.
# Calling such a node directly (``grad_fn(*grads)``) still fills zeros first, as before.


# the ops whose PyTorch node is written in C++ (not generated): its name() is qualified
_CPP_NODES = frozenset({"CopySlices", "CopyBackwards", "NotImplemented"})


# Note [Inline edges] (_engine.py): a node holds the next node itself, so freeing a long chain
# would recurse once per node in C; the trashcan unwinds it (the node classes inherit this
# dealloc, and Node's own trashcan applies only to instances of Node's dealloc)
@cython.trashcan(True)
@cython.cclass
class OpNode(Node):
    """The backward node of a built-in op; ``_apply_grads`` calls the op's backward rule.

    The node is the ``ctx`` of the rule: ``ctx.input(i)``, ``ctx.output()``,
    ``ctx.needs_input_grad`` and the forward's keyword attributes as ``ctx.<name>``.
    """

    def name(self):
        name = self.op.node
        # PyTorch's C++ nodes among the ops: name() is qualified, the class name is not
        return "torch::autograd::" + name if name in _CPP_NODES else name

    def _materializes_grads(self):
        """Note [Rules that fill missing gradients]: False for an op whose rules take None
        for a missing gradient (split, unbind: one output per piece, most of them often
        unused), so the engine builds no zeros Tensor per unused piece."""
        op: OpSpec = self.op
        return not op.fills_missing

    def _apply_grads(self, grads):
        op: OpSpec = self.op
        if op.fast_backward is not None and not is_grad_enabled():
            return self._apply_fast(grads)  # Note [Fast backward rules]
        result = op.backward(self, *grads)
        if isinstance(result, tuple) or isinstance(result, list):
            return result
        return (result,)

    def __call__(self, *grads):
        """``grad_fn(*grads)``, as PyTorch's built-in nodes: the backward formula applied to
        ``grads`` (one per forward output, a tensor or None) under the current grad mode, so
        with grad mode on the result is differentiable. No hooks run and the results are not
        reduced to the inputs' shapes or cast (the engine does both). Returns one gradient
        per forward input (None for those needing none): the tensor itself for one input."""
        _engine.check_node_call_arguments(self, grads)
        n: cython.Py_ssize_t = len(self.next_functions)
        grads = list(grads)
        if all(grad is None for grad in grads):
            return None if n == 1 else (None,) * n  # nothing flows: PyTorch's undefined grads
        metas: tuple = self._input_metadata
        for slot in range(len(grads)):
            if grads[slot] is None:
                meta: InputMeta = metas[slot]
                grads[slot] = _engine.runtime().zeros(meta.shape, meta.dtype)
        outputs = list(self._apply_grads(grads))
        edges: tuple = self.next_functions
        for i in range(min(n, len(outputs))):
            if edges[i][0] is None:
                outputs[i] = None  # the formulas compute only what an edge needs, as PyTorch's
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _apply_fast(self, grads, arrays=False):
        """The fast rule on ``grads`` (Tensors, None, or with ``arrays`` numpy arrays too).
        With ``arrays`` (the engine's Note [Gradients as arrays] in _task.py) the results are
        left as arrays, else wrapped in Tensors; an incoming Tensor passed through stays
        itself either way."""
        op: OpSpec = self.op
        n: cython.Py_ssize_t = len(grads)
        i: cython.Py_ssize_t
        if n == 1:  # one output, the common case: no argument list to build
            return self._fast_one(grads[0], arrays)
        # numpy's warnings are off: the graph task silences them (Note [Quiet backward])
        incoming = [None] * n
        for i in range(n):
            incoming[i] = _array_of(grads[i])
        return self._fast_outputs(op.fast_backward(self, *incoming), grads, incoming, arrays)

    def _fast_one(self, grad, arrays):
        """``_apply_fast`` of a node with one output, on its one gradient."""
        op: OpSpec = self.op
        first = _array_of(grad)
        # Note [Compiled kernels]; float16 and a number compute in float32 (the rules)
        if first is not None and op.kernel != KERNEL_NONE and _dtype_of(first) is not _F16:
            outputs = self._kernel_backward(op.kernel, grad, first, arrays)
            if outputs is not None:
                return outputs
        return self._fast_outputs(op.fast_backward(self, first), (grad,), (first,), arrays)

    def _fast_outputs(self, result, grads, incoming, arrays: cython.bint) -> list:
        """The fast rule's ``result`` as the engine's list of gradients (``_apply_fast``)."""
        if not isinstance(result, tuple):
            result = (result,)
        n: cython.Py_ssize_t = len(incoming)
        m: cython.Py_ssize_t = len(result)
        outputs = [None] * m
        for j in range(m):
            value = result[j]
            if value is None:
                continue
            reused = None
            for i in range(n):  # an incoming gradient passed through: reuse it as it came
                if value is incoming[i]:
                    reused = grads[i]
                    break
            if reused is None:
                if arrays:  # a 0-d result may come back as a numpy scalar
                    reused = value if type(value) is _ndarray else np.asarray(value)
                else:
                    reused = _wrap(value)
            outputs[j] = reused
        return outputs

    def _kernel_backward(self, kernel: cython.int, grad, g, arrays: cython.bint):
        """The fast rule of an arithmetic op on incoming gradient ``g`` (the array of ``grad``,
        a Tensor or ``g`` itself), or None to use the Python rule (Note [Compiled kernels]);
        the new gradients as arrays with ``arrays``, else as Tensors."""
        needs: tuple = self.needs_input_grad
        if kernel == KERNEL_MUL:
            return [_result(_arith_kernel(KERNEL_MUL, g, self._operand(1)), arrays)
                    if needs[0] else None,
                    _result(_arith_kernel(KERNEL_MUL, g, self._operand(0)), arrays)
                    if needs[1] else None]
        if kernel == KERNEL_NEG:
            return [_result(_arith_kernel(KERNEL_NEG, g, None), arrays)]
        if kernel == KERNEL_DIV:
            b = self._operand(1)
            return [_result(_arith_kernel(KERNEL_DIV, g, b), arrays) if needs[0] else None,
                    _result(_arith_kernel(
                        KERNEL_DIV,
                        _arith_kernel(KERNEL_MUL, _arith_kernel(KERNEL_NEG, g, None), self.data(0)),
                        _arith_kernel(KERNEL_MUL, b, b)), arrays) if needs[1] else None]
        attrs = self.attrs
        if attrs is not _ALPHA_ONE and (attrs is None or attrs.get("alpha", 1) != 1):
            return None  # the dunders' shared attrs are alpha 1 without a lookup
        if kernel == KERNEL_ADD:
            return [grad, grad]
        if kernel == KERNEL_SUB:
            return [grad, _result(_arith_kernel(KERNEL_NEG, g, None), arrays)
                    if needs[1] else None]
        return None

    def data(self, index):
        """Forward input ``index``'s array as saved, or the saved number (fast rules)."""
        value = self._operand(index)
        if type(value) is float or type(value) is int:  # Note [Scalar operands]
            meta: InputMeta = self._input_metadata[0]
            return _scalar_array(value, meta.np_dtype)
        return value

    def _operand(self, index: cython.Py_ssize_t):
        """``data(index)``, but a saved number as it is: the small kernels read a Python
        number directly and numpy converts it to the array's dtype (NEP 50), so the kernels
        of mul and div skip the 0-d array (a graph of many distinct constants, as
        ``x * c_i`` for 10,000 values of ``c_i``, would make one per node)."""
        if self._released:
            raise RuntimeError(_engine.BACKWARD_TWICE_MESSAGE)
        value = self._kept(index)
        if isinstance(value, SavedTensor):
            saved: SavedTensor = value
            return saved.unpack_data(self)
        return value

    def _kept(self, index: cython.Py_ssize_t):
        """Saved input ``index`` as kept in ``_kept_inputs`` (a SavedTensor or the value);
        KeyError if the op did not save it, as a dict of the saved inputs would raise."""
        kept: tuple = self._kept_inputs
        if kept is None or index < 0 or index >= len(kept) or kept[index] is _NOT_SAVED:
            raise KeyError(index)
        return kept[index]

    @property
    def _saved_inputs(self):
        """The saved inputs as ``{input index: SavedTensor or value}``, None when the op saved
        none (built on each read; the node keeps them in a tuple, Note [Compact nodes])."""
        kept: tuple = self._kept_inputs
        if kept is None:
            return None
        return {i: value for i, value in enumerate(kept) if value is not _NOT_SAVED}

    def output_data(self):
        """The forward output's array as saved (fast rules)."""
        if self._released:
            raise RuntimeError(_engine.BACKWARD_TWICE_MESSAGE)
        return self._saved_output.unpack_data(self)

    def input(self, index):
        """Forward input ``index`` as saved (raises if freed or modified in place)."""
        if self._released:
            raise RuntimeError(_engine.BACKWARD_TWICE_MESSAGE)
        value = self._kept(index)
        if isinstance(value, SavedTensor):
            return value.unpack(self)
        return value

    def output(self):
        if self._released:
            raise RuntimeError(_engine.BACKWARD_TWICE_MESSAGE)
        return self._saved_output.unpack(self)

    def __getattr__(self, name):
        # the forward's keyword attributes (dim, keepdim, shapes) read as ctx.dim
        attrs = self.attrs
        if attrs is not None and name in attrs:
            return attrs[name]
        # PyTorch's names of the saved values (grad_fn._saved_result), gradviz/ops/_saved.py
        if _saved_attribute is not None and (name.startswith("_saved_")
                                             or name.startswith("_raw_saved_")):
            return _saved_attribute(self, name)
        raise AttributeError(f"'{self.op.node}' object has no attribute '{name}'")

    def __dir__(self):
        names = object.__dir__(self)
        if _saved_names is not None:
            return _saved_names(self, names)
        return names

    def saved_tensor_count(self):
        count = 0
        nbytes = 0
        if self._kept_inputs is not None:
            for value in self._kept_inputs:
                if isinstance(value, SavedTensor):
                    count += 1
                    nbytes += value.nbytes()
        if self._saved_output is not None:
            count += 1
            nbytes += self._saved_output.nbytes()
        return count, nbytes

    def release_variables(self):
        if self._kept_inputs is None and self._saved_output is None:
            return  # nothing saved: a second backward through this node is fine
        saved: SavedTensor
        if self._kept_inputs is not None:
            for value in self._kept_inputs:
                if isinstance(value, SavedTensor):
                    saved = value
                    saved.release()
        if self._saved_output is not None:
            self._saved_output.release()
        self._released = True


# Note [Node classes]
# -------------------
# PyTorch's backward nodes are instances of one class per node name: ``type(y.grad_fn)`` prints
# ``<class 'MulBackward0'>``, nodes of one name share it, and its module is ``builtins`` (a C
# type named without a dot). gradviz's built-in nodes are OpNodes, so each node name gets a
# subclass of OpNode named after it that adds nothing, made once, when the first op of that
# name is defined; ``_new_node`` allocates the op's class as it allocated OpNode, and
# ``isinstance(node, OpNode)`` still holds. Compiled, the subclass is made as PyTorch makes its
# node classes, as a C type (``gradviz_node_class`` in _ops.pxd): a Python subclass would cost
# every node a Python-level lookup per cpdef call (Cython's check for Python overrides runs on
# heap types) and a slower deallocation, doubling the engine's time per node. Interpreted, it
# is an ordinary subclass without a ``__dict__``.
_node_classes = {}


def node_class(name):
    """The OpNode subclass named ``name`` (PyTorch's node name, ``"MulBackward0"``), made once
    per name (Note [Node classes]); OpNode itself for an op without a node name."""
    if not isinstance(name, str) or not name.isidentifier():
        return OpNode
    cls = _node_classes.get(name)
    if cls is None:
        if cython.compiled:
            cls = gradviz_node_class(OpNode, name)
        else:
            cls = type(name, (OpNode,), {"__slots__": (), "__module__": "builtins",
                                         "__qualname__": name})
        _node_classes[name] = cls
    return cls


# Note [Lean traversal]
# ---------------------
# With the collector on, as in every notebook, a graph's nodes are GC objects that each young
# collection traverses, and the full ones again: in a 10,000-op chain a node is traversed
# several times while the chain is built, and Cython's traversal of an OpNode calls the
# collector's visit function on each of its 13 object fields, None included, through two
# functions (OpNode's, then Node's through its slot). That was about a fifth of a chain
# op's instructions. ``_install_lean_traversals`` gives Node, OpNode and TensorBase a
# traversal (c/lean_traverse.h) that visits only the fields holding something other than
# None, in one pass, and never the fields that cannot lead back to a node or tensor: an
# OpNode's spec and needs_input_grad, a node's input metadata, a tensor's array (numpy arrays
# are no GC objects) and version counter (neither). The plan of each type is learned from a
# probe instance and checked against the type's own traversal, so a field added later is
# traversed without anyone remembering this Note; a type whose check fails keeps Cython's
# traversal. Node classes (Note [Node classes]) inherit OpNode's, and AccumulateGrad, a
# custom Function's node and gradviz.Tensor call their base's through its slot. Collections
# free exactly what they freed before (tests/engine/test_lean_traversal.py).
def _install_lean_traversals():
    """Install the lean traversals (Note [Lean traversal]); interpreted, nothing to do."""
    if not cython.compiled:
        return
    node: Node = Node.__new__(Node)
    node._input_metadata = tuple([0])
    opnode: OpNode = OpNode.__new__(OpNode)
    opnode._input_metadata = tuple([1])
    opnode.op = OpSpec.__new__(OpSpec)
    opnode.needs_input_grad = tuple([2])
    tensor: TensorBase = TensorBase.__new__(TensorBase)
    tensor._data = object()
    tensor._version_counter = VersionCounter.__new__(VersionCounter)
    plans = ((Node, node, (node._input_metadata,)),
             (OpNode, opnode, (opnode._input_metadata, opnode.op, opnode.needs_input_grad)),
             (TensorBase, tensor, (tensor._data, tensor._version_counter)))
    learned = [gradviz_lean_learn(kind, probe, skip, which) == 1
               for which, (kind, probe, skip) in enumerate(plans)]
    # every plan first: a subclass's own traversal, run on its probe, calls its base's
    for which, (kind, _, _) in enumerate(plans):
        if learned[which]:
            gradviz_lean_install(kind, which)


_install_lean_traversals()


def lean_traversal(kind):
    """Whether instances of ``kind`` are traversed leanly (Note [Lean traversal])."""
    return cython.compiled and gradviz_lean_installed(kind) == 1


@cython.cfunc
def _wrap(value):
    """A numpy result as a Tensor (a 0-d result may come back as a numpy scalar)."""
    return make_tensor(value if type(value) is _ndarray else np.asarray(value))


@cython.cfunc
@cython.inline
def _result(value, arrays: cython.bint):
    """A kernel's result as the engine takes it: an array with ``arrays``, else in a Tensor
    (a 0-d result may come back as a numpy scalar)."""
    if type(value) is not _ndarray:
        value = np.asarray(value)
    return value if arrays else make_tensor(value)


@cython.cfunc
@cython.inline
def _array_of(grad):
    """The array of an incoming gradient: a Tensor's, an array itself, or None."""
    if grad is None or type(grad) is _ndarray:
        return grad
    t: TensorBase = grad
    return t._data


# Note [Small kernels]
# --------------------
# For tensors of a few elements numpy's ufunc machinery (dtype resolution, the iterator, the
# error state) costs several times the arithmetic: 3,000 instructions for a 16-element
# multiply. So when both operands are small (at most 4,096 elements), aligned, C-contiguous
# float32 or float64 arrays of one dtype and one shape, or one such array and a number (a
# 0-d array of its dtype, or a Python float or int that numpy would convert exactly as C
# does), the arithmetic of add, sub, mul, div and neg is a C loop (gradviz_small_arith in
# _ops.pxd) into an array allocated by numpy itself. Each element is one IEEE operation in
# the operands' own precision, as in numpy's loops, so results are bit-identical
# (tests/test_small_kernels.py compares them with numpy over special values); the loop
# never warns, as the kernels it stands for run quiet. A splat, one element broadcast to a
# shape with all strides 0 (the gradient of a sum or a mean, and every piece ``stack`` or
# ``cat`` cuts from it), is covered too, with a splat, an array of its shape or a number: the
# result is numpy's new C-contiguous array. The backward of ``stack`` of 10,000 products
# went from 9.6 to 5.9 ms (bench/fanin.py). So is an array of 2+ dims with a 1-D array of its
# last dim's length on either side, up to 65,536 elements (gradviz_small_rows: ``x @ W + b``,
# whose (32, 200) + (200,) took numpy 2.5 us and takes 0.8), when the vector holds no NaN
# (with a NaN on both sides numpy's vectorized loops may keep either payload). Everything else
# (other broadcasting, other dtypes, other strided views, large arrays) goes to the ufunc.


def _enable_small_kernels():
    """Find numpy's C-API table and check the small kernels against numpy once; on any
    surprise, leave them off (everything then goes through the ufuncs)."""
    if not cython.compiled:
        return False
    try:
        try:
            from numpy._core import _multiarray_umath as umath
        except ImportError:  # numpy 1.x
            from numpy.core import _multiarray_umath as umath
        gradviz_small_enable(umath._ARRAY_API, np.ndarray, _F32, _F64)
        gradviz_fma_enable()
        x = np.array([[1.5, -2.0, 3.25]], dtype=np.float32)
        y = gradviz_small_arith(KERNEL_DIV, x, np.array([[2.0, 4.0, -0.5]], np.float32))
        z = gradviz_small_arith(KERNEL_SUB, 1.0, np.arange(3.0))
        if not (type(y) is np.ndarray and y.dtype == np.float32 and y.shape == (1, 3)
                and y.tolist() == [[0.75, -0.5, -6.5]] and y.flags.writeable
                and type(z) is np.ndarray and z.tolist() == [1.0, 0.0, -1.0]):
            raise RuntimeError("small kernels disagree with numpy")
    except Exception:  # noqa: BLE001 - any failure means: use numpy's ufuncs
        gradviz_small_disable()
        return False
    return True


_SMALL_KERNELS = _enable_small_kernels()


# Note [Array cache]
# ------------------
# A training step allocates the same large arrays every time (activations, gradients, a
# weight's gradient), and frees them at the end of the step or during backward. glibc gives
# large blocks back to the system when they are freed (munmap, or trimming the heap), so the
# next step's arrays start on fresh pages: one page fault per 4 KB touched, measured at
# 1-1.5 µs each on the development VMs, about a fifth of an MLP step (bench/mlp.py). So while
# gradviz's own ops run on large inputs (at least 8,192 elements: apply_op) and while a
# backward runs (GraphTask.run and step), and always inside the arithmetic kernels' quiet
# context, numpy's memory handler (NEP 49; a context variable, so other code, other threads
# and numpy arrays made elsewhere are untouched) is
# gradviz_cache_handler (_ops.pxd): it allocates with malloc, and when an array it
# allocated is freed, keeps the block (if at least 32 KB) for the next allocation of that
# size, up to 64 blocks and a byte limit (GRADVIZ_ARRAY_CACHE_MB, default 256; 0 turns the
# cache off), dropping the oldest first. Nothing else changes: the same arrays, the same
# values. ``array_cache_info()`` and ``array_cache_clear()`` inspect and empty it, like
# PyTorch's ``torch.cuda.empty_cache()`` for its caching allocator. glibc only (it needs
# malloc_usable_size); elsewhere, or interpreted, arrays are numpy's as usual.

_DEFAULT_CACHE_MB = 256


def _cache_limit_from_env():
    value = os.environ.get("GRADVIZ_ARRAY_CACHE_MB", "").strip()
    if not value:
        return _DEFAULT_CACHE_MB << 20
    try:
        megabytes = float(value)
    except ValueError:
        warnings.warn(f"GRADVIZ_ARRAY_CACHE_MB={value!r} is not a number of megabytes; "
                      f"using the default ({_DEFAULT_CACHE_MB})", RuntimeWarning, stacklevel=2)
        return _DEFAULT_CACHE_MB << 20
    return max(0, int(megabytes * (1 << 20)))


def _enable_array_cache():
    """Find numpy's handler API and check once that arrays made inside the cache use it and
    that leaving restores numpy's handler; on any surprise, leave the cache off."""
    if not cython.compiled or not _SMALL_KERNELS:
        return False
    limit = _cache_limit_from_env()
    if limit == 0:
        return False
    try:
        try:
            from numpy._core import _multiarray_umath as umath
        except ImportError:  # numpy 1.x
            from numpy.core import _multiarray_umath as umath
        get_name = umath.get_handler_name
        before = get_name()
        gradviz_cache_enable(umath._ARRAY_API, limit)
        previous = gradviz_cache_enter()
        try:
            probe = np.empty(1 << 14)
        finally:
            gradviz_cache_exit(previous)
        if get_name(probe) != "gradviz_array_cache" or get_name() != before:
            raise RuntimeError("numpy's memory handler did not switch")
        del probe
        gradviz_cache_clear(-1)  # the probe's block: start empty
    except Exception:  # noqa: BLE001 - any failure means: numpy's own allocator
        gradviz_cache_disable()
        return False
    return True


def array_cache_info():
    """The array cache's state (Note [Array cache]): ``enabled``, ``hits`` and ``misses``
    (allocations of at least 32 KB inside it), the ``blocks`` and ``bytes`` kept, and the
    byte ``limit``."""
    if not cython.compiled:
        return {"enabled": False, "hits": 0, "misses": 0, "blocks": 0, "bytes": 0, "limit": 0}
    info = {"enabled": _ARRAY_CACHE}
    info.update(gradviz_cache_stats())
    return info


def array_cache_clear(limit=None):
    """Give every block the array cache keeps back to the system; ``limit`` (bytes) also sets
    its byte limit (0: keep nothing)."""
    if limit is not None and (type(limit) is not int or limit < 0):
        raise ValueError(f"array_cache_clear(limit=...) expects a number of bytes >= 0, "
                         f"got {limit!r}")
    if cython.compiled:
        gradviz_cache_clear(-1 if limit is None else limit)


_ARRAY_CACHE = _enable_array_cache()
if _ARRAY_CACHE and _quiet_context is not None:
    # the arithmetic kernels run their ufunc inside _quiet_context (Note [Compiled kernels]),
    # which has its own numpy handler variable: there the cache is numpy's handler for good
    _quiet_context.run(lambda: gradviz_cache_enter())


def _cache_enter():
    """Make the array cache numpy's handler in this context (Note [Array cache]); returns
    what ``_cache_exit`` gives back (None: the cache is off)."""
    if cython.compiled:
        return gradviz_cache_enter()
    return None


def _cache_exit(previous) -> cython.int:
    if cython.compiled:
        gradviz_cache_exit(previous)
    return 0


def small_kernels_enabled():
    """Whether Note [Small kernels] is in effect (compiled engine, numpy's API found)."""
    return _SMALL_KERNELS


def small_rows(kernel, a, b):
    """The row-vector kernel's ``a (kernel) b`` (a 2+-d array and a 1-D array of its last dim's
    length, either side), or None where it does not apply (Note [Small kernels]); for tests."""
    if not cython.compiled:
        return None
    return gradviz_small_rows(kernel, a, b)


def small_arith(kernel, a, b=None):
    """The small kernel's ``a (kernel) b`` (``kernel`` one of KERNEL_ADD .. KERNEL_NEG), or None
    where it does not apply and numpy's ufunc would compute it (Note [Small kernels]); for
    tests and inspection."""
    if not cython.compiled:
        return None
    return gradviz_small_arith(kernel, a, b)


# Note [Whole-array kernels]
# --------------------------
# Six operations of any size get a C loop of their own (in _ops.pxd), where numpy needs
# several passes, temporaries or a cache-hostile order:
#
# * ``a + alpha * b`` (add and sub with an ``alpha``, out of place and in place: every SGD
#   step is ``p.add_(grad, alpha=-lr)``). PyTorch computes it with a fused multiply-add on
#   CPUs that have one, rounding once; numpy would round ``alpha * b`` first and allocate it.
#   The loop is compiled for FMA and used only when the CPU has it, so the result is
#   PyTorch's, bit for bit, in one pass and no temporary. Elsewhere (and interpreted) the
#   two-step numpy result stands: one rounding more.
# * ``lerp(start, end, weight)``, the same way: PyTorch's vectorized kernel starts from the
#   nearer end, ``fma(w, end - start, start)`` for ``|w| < 0.5``, else
#   ``fma(w - 1, end - start, end)``. Besides the last bit, the end matters for infinities:
#   ``lerp(1, inf, 0.7)`` is ``inf + -0.3 * inf``, NaN, where ``1 + 0.7 * inf`` is inf.
# * ``x * y + z`` of three arrays, rounded once: addcmul's ``input + (value * t1) * t2``, whose
#   last multiply and add PyTorch's vectorized loop fuses.
# * relu's backward, ``threshold_backward(g, result)``: ``0 if result <= 0 else g`` in one
#   pass, where numpy needs a mask, a multiply and a pass to turn -0.0 into 0.0, and a NaN
#   result lets ``g`` through as in PyTorch.
#
# * the transpose of a matrix, plus a row vector: a Linear layer's product computed in the
#   swapped order (Note [Product layout] in gradviz/ops/_layout.py) comes back transposed.
#   numpy's copy of a transposed view reads one cache line per element; the loop copies in
#   32 x 32 tiles, 5x faster on a 512 x 64 float32 matrix.
# * a row vector added to every row of a matrix in place: the bias of a Linear layer's
#   product computed as written. numpy's broadcast add runs its inner loop once per row: 18
#   us on the GPT's (512, 192) float32 product, 10.5 as one loop. A bias holding a NaN goes
#   to numpy (of two NaN operands numpy's vectorized add may keep either).
#
# They cover aligned C-contiguous float32/float64 arrays of one dtype and one shape (an
# ``alpha`` that is a Python float or int; a bias of the matrix's dtype with one entry per
# row); anything else returns None and numpy computes it.


def fused_add(a, b, alpha, in_place: cython.bint = False):
    """``a + alpha * b`` rounded once per element, into ``a`` when ``in_place``, or None where
    it does not apply (Note [Whole-array kernels])."""
    if cython.compiled:
        return gradviz_fused_add(a, b, alpha, in_place)
    return None


def lerp(start, end, weight):
    """PyTorch's ``lerp`` of two arrays with an array or number ``weight``, one fused
    multiply-add per element, or None where it does not apply (Note [Whole-array
    kernels])."""
    if cython.compiled:
        return gradviz_lerp(start, end, weight)
    return None


def fused_multiply_add(x, y, z):
    """``x * y + z`` of three arrays of one dtype and shape, one fused multiply-add per
    element, or None where it does not apply (Note [Whole-array kernels])."""
    if cython.compiled:
        return gradviz_fma3(x, y, z)
    return None


def adam_step(p, g, m, v, largest, keep_gradient: cython.double, beta2: cython.double,
              keep_square: cython.double, correction2: cython.double, eps: cython.double,
              rate: cython.double, negate: cython.bint = False, decay=None,
              shrink=None) -> bool:
    """Adam's update of the arrays ``p`` (the parameter), ``m`` and ``v`` (its moments), and
    ``largest`` (AMSGrad's running maximum of ``v``, or None without AMSGrad) from ``g`` in
    place, in one pass with the bits of the numpy calls it replaces: ``keep_gradient`` is
    ``1 - beta1``, ``keep_square`` ``1 - beta2``, ``correction2`` ``sqrt(1 - beta2 ** step)``
    and ``rate`` ``-lr / (1 - beta1 ** step)``; ``negate`` (maximize) flips the gradient's sign
    first, then ``p`` is multiplied by ``shrink`` (AdamW's ``1 - lr * weight_decay``) or the
    gradient gets ``decay * p`` added (L2 weight decay), where not None (Note [Optimizer steps
    on arrays] in gradviz/optim/_optimizer.py). False, nothing written, where it does not
    apply: then the caller makes the numpy calls."""
    if not cython.compiled:
        return False
    scalars = cython.declare(gradviz_adam_scalars)
    if cython.compiled:
        scalars.keep_gradient, scalars.beta2, scalars.keep_square = keep_gradient, beta2, keep_square
        scalars.correction2, scalars.eps, scalars.rate = correction2, eps, rate
        scalars.negate = negate
        scalars.l2, scalars.decay = decay is not None, 0.0 if decay is None else decay
        scalars.decoupled, scalars.shrink = shrink is not None, 1.0 if shrink is None else shrink
    return gradviz_adam_step(p, g, m, v, largest, cython.address(scalars)) == 1


def adam_params(params, start: cython.Py_ssize_t, states, tensor_type, refresh,
                keep_gradient: cython.double, beta1: cython.double, beta2: cython.double,
                keep_square: cython.double, eps: cython.double, lr: cython.double,
                negate: cython.bint, amsgrad: cython.bint, decay=None, shrink=None) -> int:
    """Adam's step of ``params[start:]`` (a parameter group's list) in one call, each
    parameter as ``adam_step`` updates it, in their order, up to the first one this does not
    cover: returns its index (``len(params)`` when all are done). Covered: a ``tensor_type``
    with a gradient and its state made (``states[p]``, ``step``, ``exp_avg``, ``exp_avg_sq``
    and with ``amsgrad`` ``max_exp_avg_sq``, none of them an inference tensor), ``step`` a 0-d
    float32 or float64 counter, arrays ``adam_step`` covers; the counter is incremented as
    ``np.add(counter, 1, out=counter)`` does and the bias corrections computed from it as in
    Python (``gradviz_adam_corrections``). Each written tensor's version is bumped, and the live
    views of its base renewed through ``refresh(root)``, in the order of the per-parameter
    path. (Note [Adam's parameter group in one call] in gradviz/optim/_optimizer.py.)"""
    n: cython.Py_ssize_t = len(params)
    if not cython.compiled:
        return start
    scalars = cython.declare(gradviz_adam_scalars)
    scalars.keep_gradient, scalars.beta2, scalars.keep_square = keep_gradient, beta2, keep_square
    scalars.eps, scalars.negate = eps, negate
    scalars.l2, scalars.decay = decay is not None, 0.0 if decay is None else decay
    scalars.decoupled, scalars.shrink = shrink is not None, 1.0 if shrink is None else shrink
    i: cython.Py_ssize_t
    t: cython.double
    for i in range(start, n):
        p = params[i]
        if not isinstance(p, tensor_type):
            return i
        parameter: TensorBase = p
        grad = parameter.grad
        state = states.get(p)
        if grad is None or not isinstance(grad, tensor_type) or type(state) is not dict:
            return i
        step = state.get("step")
        exp_avg = state.get("exp_avg")
        exp_avg_sq = state.get("exp_avg_sq")
        largest = state.get("max_exp_avg_sq") if amsgrad else None
        if not (isinstance(step, tensor_type) and isinstance(exp_avg, tensor_type)
                and isinstance(exp_avg_sq, tensor_type)
                and (not amsgrad or isinstance(largest, tensor_type))):
            return i
        counter: TensorBase = step
        m: TensorBase = exp_avg
        v: TensorBase = exp_avg_sq
        most: TensorBase = largest if amsgrad else None
        if (counter._version_counter.inference or parameter._version_counter.inference
                or m._version_counter.inference or v._version_counter.inference
                or (amsgrad and most._version_counter.inference)):
            return i
        if (not gradviz_adam_next_count(counter._data, cython.address(t))
                or not gradviz_adam_corrections(beta1, beta2, lr, t, cython.address(scalars))):
            return i
        grad_tensor: TensorBase = grad
        most_data = most._data if amsgrad else None
        if not gradviz_adam_covers(parameter._data, grad_tensor._data, m._data, v._data,
                                   most_data, cython.address(scalars)):
            return i
        gradviz_adam_count(counter._data, t)
        _written_through(counter, refresh)
        gradviz_adam_run(parameter._data, grad_tensor._data, m._data, v._data, most_data,
                         cython.address(scalars))
        if scalars.decoupled:
            _written_through(parameter, refresh)
        _written_through(m, refresh)
        _written_through(v, refresh)
        _written_through(v, refresh)
        if amsgrad:
            _written_through(most, refresh)
        _written_through(parameter, refresh)
    return n


@cython.cfunc
def _written_through(tensor: TensorBase, refresh):
    """What an in-place op does after writing into ``tensor``'s array, for a tensor that is
    not an inference tensor: bump its version and renew the history of its base's live views
    (``_written`` in gradviz/optim/_optimizer.py)."""
    tensor._version_counter.value += 1
    root: TensorBase = tensor if tensor._base is None else tensor._base
    if root._views is not None:
        refresh(root)


def threshold_backward_kernel(g, result):
    """relu's backward ``0 if result <= 0 else g`` in one pass, or None where it does not
    apply (Note [Whole-array kernels])."""
    if cython.compiled:
        return gradviz_threshold_backward(g, result)
    return None


def transpose_add(t, bias=None):
    """``t.T + bias`` (or ``t.T``) as a new C-contiguous array, copied in cache-sized tiles, or
    None where it does not apply (Note [Whole-array kernels])."""
    if cython.compiled:
        return gradviz_transpose_add(t, bias)
    return None


def add_row_vector(out, bias) -> bool:
    """``out += bias`` in place for a matrix and a row vector of its dtype without NaN;
    False, nothing written, where it does not apply (Note [Whole-array kernels])."""
    if cython.compiled:
        return gradviz_add_row_vector(out, bias) == 1
    return False


_F32_DTYPE = np.dtype(np.float32)
_F64_DTYPE = np.dtype(np.float64)


GELU_AVX2 = 1
GELU_AVX512 = 2
_GELU_KERNELS = False


def gelu_kernels_up_to(limit: cython.int = GELU_AVX512) -> int:
    """Choose the instruction set of the GELU loops (Note [GELU kernels] in
    gradviz/ops/_activation.py): the widest the CPU has, at most ``limit`` (``GELU_AVX2``,
    ``GELU_AVX512``, or 0: none). Returns the one in use, 0 when the loops do not run
    (interpreted, or a CPU without AVX2 and FMA). Done once at import; tests lower the limit
    to compare the two compilations of the loops."""
    global _GELU_KERNELS
    level: cython.int = 0
    if cython.compiled:
        level = gradviz_gelu_enable_up_to(limit)
    _GELU_KERNELS = level != 0
    return level


gelu_kernels_up_to()


@cython.cfunc
def _float32_address(a):
    """The data address of ``a`` if it is a C-contiguous float32 ndarray, else 0."""
    if type(a) is not np.ndarray or a.dtype != _F32_DTYPE or not a.flags.c_contiguous:
        return 0
    return a.__array_interface__["data"][0]


def gelu_float32(x, posinf_is_nan: cython.bint = False):
    """``x * Phi(x)`` (the exact GELU) of a C-contiguous float32 array as a new array, +inf
    giving NaN when ``posinf_is_nan``; None where the kernel does not apply (Note [GELU
    kernels] in gradviz/ops/_activation.py)."""
    if not cython.compiled or not _GELU_KERNELS:
        return None
    source = _float32_address(x)
    if not source:
        return None
    out = np.empty(x.shape, np.float32)
    n: cython.Py_ssize_t = x.size
    if cython.compiled:
        gradviz_gelu_forward_f32(cython.cast(cython.p_float, cython.cast(cython.size_t, source)),
                                 cython.cast(cython.p_float, cython.cast(
                                     cython.size_t, out.__array_interface__["data"][0])),
                                 n, posinf_is_nan)
    return out


def array_address(a):
    """The address of the first element of ndarray ``a`` (``a.ctypes.data``, without building
    a ctypes object: the summary cache asks for it per gradient)."""
    if cython.compiled and type(a) is np.ndarray:
        return gradviz_array_address(a)
    return a.__array_interface__["data"][0]


def summary_stats(a):
    """``(sum, sum of squares, min, max)`` of a non-empty C-contiguous float32 or float64
    ndarray, in double precision and numpy's summation order (Note [Summary kernel] in
    gradviz/instrument/_summary.py); None where the kernel does not apply (interpreted, other
    dtypes or layouts), and the caller computes them with numpy."""
    if not cython.compiled:
        return None
    if type(a) is not np.ndarray or not a.flags.c_contiguous or a.size == 0:
        return None
    dtype = a.dtype
    if dtype != _F32_DTYPE and dtype != _F64_DTYPE:
        return None
    n: cython.Py_ssize_t = a.size
    out = cython.declare(cython.double[4])
    if cython.compiled:
        address: cython.size_t = gradviz_array_address(a)
        if dtype == _F32_DTYPE:
            gradviz_stats_f32(cython.cast(cython.p_float, address), n, out)
        else:
            gradviz_stats_f64(cython.cast(cython.p_double, address), n, out)
    return (out[0], out[1], out[2], out[3])


def _pool2d_plan(planes, height, width, out_height, out_width, geometry):
    """The C description of a 2-D pooling (Note [Max pool kernels])."""
    plan = cython.declare(gradviz_pool2d)
    if cython.compiled:
        plan.planes, plan.height, plan.width = planes, height, width
        plan.out_height, plan.out_width = out_height, out_width
        plan.kernel_h, plan.kernel_w = geometry.kernel
        plan.stride_h, plan.stride_w = geometry.stride
        plan.pad_h, plan.pad_w = geometry.padding
        plan.dilation_h, plan.dilation_w = geometry.dilation
    return plan


def max_pool2d_arrays(x, geometry, out_sizes):
    """``(values, positions)`` of 2-D max pooling of a C-contiguous float32 or float64
    (N, C, H, W) ndarray: each window's maximum and its winning kernel offset (int64), as
    torch's CPU kernel picks it; None where the kernel does not apply (interpreted, other
    dtypes or layouts). Note [Max pool kernels] in gradviz/ops/_conv.py."""
    if not cython.compiled:
        return None
    if type(x) is not np.ndarray or x.ndim != 4 or not x.flags.c_contiguous:
        return None
    dtype = x.dtype
    if dtype != _F32_DTYPE and dtype != _F64_DTYPE:
        return None
    out_height, out_width = out_sizes
    values = np.empty(x.shape[:2] + (out_height, out_width), dtype)
    positions = np.empty(values.shape, np.int64)
    if cython.compiled:
        plan: gradviz_pool2d = _pool2d_plan(x.shape[0] * x.shape[1], x.shape[2], x.shape[3],
                                           out_height, out_width, geometry)
        source: cython.size_t = gradviz_array_address(x)
        out: cython.size_t = gradviz_array_address(values)
        winners: cython.size_t = gradviz_array_address(positions)
        if dtype == _F32_DTYPE:
            gradviz_max_pool2d_f32(cython.cast(cython.p_float, source), cython.address(plan),
                                   cython.cast(cython.p_float, out),
                                   cython.cast(cython.p_longlong, winners))
        else:
            gradviz_max_pool2d_f64(cython.cast(cython.p_double, source), cython.address(plan),
                                   cython.cast(cython.p_double, out),
                                   cython.cast(cython.p_longlong, winners))
    return values, positions


def max_pool2d_backward_arrays(g, positions, geometry, size):
    """The (N, C, H, W) gradient of a 2-D max pooling from its output gradient ``g`` and the
    winners :func:`max_pool2d_arrays` gave; None where the kernel does not apply."""
    if not cython.compiled:
        return None
    if (type(g) is not np.ndarray or g.ndim != 4 or not g.flags.c_contiguous
            or type(positions) is not np.ndarray or not positions.flags.c_contiguous
            or positions.dtype != np.int64 or positions.size != g.size):
        return None
    dtype = g.dtype
    if dtype != _F32_DTYPE and dtype != _F64_DTYPE:
        return None
    grad = np.empty(g.shape[:2] + tuple(size), dtype)
    done: cython.int = 0
    if cython.compiled:
        plan: gradviz_pool2d = _pool2d_plan(g.shape[0] * g.shape[1], size[0], size[1],
                                           g.shape[2], g.shape[3], geometry)
        source: cython.size_t = gradviz_array_address(g)
        winners: cython.size_t = gradviz_array_address(positions)
        out: cython.size_t = gradviz_array_address(grad)
        if dtype == _F32_DTYPE:
            done = gradviz_max_pool2d_backward_f32(
                cython.cast(cython.p_float, source), cython.cast(cython.p_longlong, winners),
                cython.address(plan), cython.cast(cython.p_float, out))
        else:
            done = gradviz_max_pool2d_backward_f64(
                cython.cast(cython.p_double, source), cython.cast(cython.p_longlong, winners),
                cython.address(plan), cython.cast(cython.p_double, out))
    return grad if done else None  # 0: a kernel too large for the kernel's offset table


def small_bmm(a, b, input=None, beta: cython.double = 1.0, alpha: cython.double = 1.0):
    """``a @ b`` of C-contiguous (batches, rows, inner) and (batches, inner, columns) float32
    or float64 arrays, each entry summed k by k as torch's small-matrix loop sums it; with
    ``input`` (C-contiguous, the output's shape and dtype) torch's baddbmm rule, ``beta`` and
    ``alpha`` rounded to the dtype. None where the kernel does not apply (Note [Small batched
    products] in gradviz/ops/_linalg.py)."""
    if not cython.compiled:
        return None
    dtype = a.dtype
    if (type(a) is not np.ndarray or type(b) is not np.ndarray or a.ndim != 3 or b.ndim != 3
            or (dtype != _F32_DTYPE and dtype != _F64_DTYPE) or b.dtype != dtype
            or not a.flags.c_contiguous or not b.flags.c_contiguous
            or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]):
        return None
    out = np.empty((a.shape[0], a.shape[1], b.shape[2]), dtype)
    if input is not None and (type(input) is not np.ndarray or input.dtype != dtype
                              or input.shape != out.shape or not input.flags.c_contiguous):
        return None
    if cython.compiled:
        batches: cython.Py_ssize_t = a.shape[0]
        rows: cython.Py_ssize_t = a.shape[1]
        inner: cython.Py_ssize_t = a.shape[2]
        columns: cython.Py_ssize_t = b.shape[2]
        first: cython.size_t = gradviz_array_address(a)
        second: cython.size_t = gradviz_array_address(b)
        into: cython.size_t = gradviz_array_address(out)
        added: cython.size_t = 0 if input is None else gradviz_array_address(input)
        if dtype == _F32_DTYPE:
            gradviz_small_bmm_f32(cython.cast(cython.p_float, first),
                                  cython.cast(cython.p_float, second),
                                  cython.cast(cython.p_float, added), cython.cast(cython.float, beta),
                                  cython.cast(cython.float, alpha), batches, rows, inner, columns,
                                  cython.cast(cython.p_float, into))
        else:
            gradviz_small_bmm_f64(cython.cast(cython.p_double, first),
                                  cython.cast(cython.p_double, second),
                                  cython.cast(cython.p_double, added), beta, alpha, batches, rows,
                                  inner, columns, cython.cast(cython.p_double, into))
    return out


def gelu_backward_float32(x, g):
    """``g * (Phi(x) + x phi(x))``, the exact GELU's derivative times ``g``, for C-contiguous
    float32 arrays of one shape, as a new array; None where the kernel does not apply (Note
    [GELU kernels] in gradviz/ops/_activation.py)."""
    if not cython.compiled or not _GELU_KERNELS:
        return None
    source = _float32_address(x)
    gradient = _float32_address(g)
    if not source or not gradient or x.shape != g.shape:
        return None
    out = np.empty(x.shape, np.float32)
    n: cython.Py_ssize_t = x.size
    if cython.compiled:
        gradviz_gelu_backward_f32(
            cython.cast(cython.p_float, cython.cast(cython.size_t, source)),
            cython.cast(cython.p_float, cython.cast(cython.size_t, gradient)),
            cython.cast(cython.p_float, cython.cast(
                cython.size_t, out.__array_interface__["data"][0])), n)
    return out


@cython.cfunc
def _flat_plan(windows, planes: cython.Py_ssize_t, starts) -> "gradviz_flat_windows":
    """The C description of 2-D flat windows (Note [Flat windows]); ``starts`` an intp array
    of the offsets' first entries, kept alive by the caller."""
    plan = cython.declare(gradviz_flat_windows)
    if cython.compiled:
        plan.planes = planes
        plan.height, plan.width = windows.sizes
        plan.pad_h, plan.pad_w = windows.padding
        plan.padded_w = windows.padded[1]
        plan.flat, plan.length, plan.kernels = windows.flat, windows.length, len(windows.starts)
        plan.starts = cython.cast(cython.p_Py_ssize_t,
                                  cython.cast(cython.size_t, gradviz_array_address(starts)))
    return plan


def _float_kind(a):
    """1 for a C-contiguous float32 ndarray, 2 for float64, else 0."""
    if type(a) is not np.ndarray or not a.flags.c_contiguous:
        return 0
    dtype = a.dtype
    return 1 if dtype == _F32_DTYPE else 2 if dtype == _F64_DTYPE else 0


def unfold_wide_arrays(x, windows):
    """The (N, C * K, length) wide columns of a C-contiguous float32 or float64 (N, C, H, W)
    ndarray over 2-D flat windows (Note [Flat windows] in gradviz/ops/_flat_windows.py), in one
    pass; None where the kernel does not apply (interpreted, other dtypes, layouts or dims)."""
    kind = _float_kind(x)
    if not cython.compiled or not kind or x.ndim != 4 or len(windows.sizes) != 2:
        return None
    n, c = x.shape[0], x.shape[1]
    cols = np.empty((n, c * len(windows.starts), windows.length), x.dtype)
    scratch = np.empty(windows.flat, x.dtype)
    starts = windows.start_array
    if cython.compiled:
        plan: gradviz_flat_windows = _flat_plan(windows, n * c, starts)
        source: cython.size_t = gradviz_array_address(x)
        out: cython.size_t = gradviz_array_address(cols)
        spare: cython.size_t = gradviz_array_address(scratch)
        if kind == 1:
            gradviz_unfold_wide_f32(cython.cast(cython.p_float, source), cython.address(plan),
                                    cython.cast(cython.p_float, out),
                                    cython.cast(cython.p_float, spare))
        else:
            gradviz_unfold_wide_f64(cython.cast(cython.p_double, source), cython.address(plan),
                                    cython.cast(cython.p_double, out),
                                    cython.cast(cython.p_double, spare))
    return cols


def fold_wide_arrays(cols, windows):
    """The (N, C, H, W) sums of C-contiguous float32 or float64 (N, C * K, length) wide columns
    back into place (the adjoint of :func:`unfold_wide_arrays`), in numpy's order; None where
    the kernel does not apply."""
    kind = _float_kind(cols)
    if not cython.compiled or not kind or cols.ndim != 3 or len(windows.sizes) != 2:
        return None
    kernels = len(windows.starts)
    n, rows = cols.shape[0], cols.shape[1]
    if rows % kernels or cols.shape[2] != windows.length:
        return None
    c = rows // kernels
    out = np.empty((n, c) + tuple(windows.sizes), cols.dtype)
    scratch = np.empty(windows.flat, cols.dtype)
    starts = windows.start_array
    if cython.compiled:
        plan: gradviz_flat_windows = _flat_plan(windows, n * c, starts)
        source: cython.size_t = gradviz_array_address(cols)
        target: cython.size_t = gradviz_array_address(out)
        spare: cython.size_t = gradviz_array_address(scratch)
        if kind == 1:
            gradviz_fold_wide_f32(cython.cast(cython.p_float, source), cython.address(plan),
                                  cython.cast(cython.p_float, target),
                                  cython.cast(cython.p_float, spare))
        else:
            gradviz_fold_wide_f64(cython.cast(cython.p_double, source), cython.address(plan),
                                  cython.cast(cython.p_double, target),
                                  cython.cast(cython.p_double, spare))
    return out


def _direct_conv_enable() -> cython.bint:
    """Whether the direct convolution may run (compiled, on a CPU with AVX-512F)."""
    if cython.compiled:
        return gradviz_direct_conv_enable() != 0
    return False


_DIRECT_CONV = _direct_conv_enable()


def direct_conv2d_arrays(x, weight, bias, geometry, out_sizes):
    """The (N, O, *out_sizes) cross-correlation of a C-contiguous float32 or float64 (N, C, H, W)
    ndarray with a (O, C, kh, kw) ``weight`` of its dtype, plus an (O,) ``bias`` or None,
    computed directly (Note [Direct convolution] in gradviz/ops/_conv.py); None where the
    kernel does not apply (interpreted, a CPU without AVX-512F, other dtypes, layouts or dims,
    a kernel wider than 64)."""
    kind = _float_kind(x)
    if (not cython.compiled or not _DIRECT_CONV or not kind or x.ndim != 4 or _float_kind(weight) != kind
            or weight.ndim != 4 or weight.shape[1] != x.shape[1]):
        return None
    if bias is not None and (_float_kind(bias) != kind or bias.shape != (weight.shape[0],)):
        return None
    out_height, out_width = out_sizes
    out = np.empty((x.shape[0], weight.shape[0], out_height, out_width), x.dtype)
    done: cython.int = 0
    if cython.compiled:
        plan = cython.declare(gradviz_conv2d)
        plan.batch, plan.channels, plan.height, plan.width = x.shape
        plan.out_channels, plan.out_height, plan.out_width = weight.shape[0], out_height, out_width
        plan.kernel_h, plan.kernel_w = weight.shape[2], weight.shape[3]
        plan.stride_h, plan.stride_w = geometry.stride
        plan.pad_h, plan.pad_w = geometry.padding
        plan.dilation_h, plan.dilation_w = geometry.dilation
        scratch = _aligned_empty(
            gradviz_conv2d_scratch(cython.address(plan), 16 if kind == 1 else 8), x.dtype)
        packed = np.empty(gradviz_conv2d_packed(cython.address(plan)), x.dtype)
        taps = np.empty(x.shape[1] * weight.shape[2] * weight.shape[3], np.intp)
        source: cython.size_t = gradviz_array_address(x)
        w: cython.size_t = gradviz_array_address(weight)
        b: cython.size_t = 0 if bias is None else gradviz_array_address(bias)
        target: cython.size_t = gradviz_array_address(out)
        spare: cython.size_t = gradviz_array_address(scratch)
        repacked: cython.size_t = gradviz_array_address(packed)
        offsets: cython.size_t = gradviz_array_address(taps)
        if kind == 1:
            done = gradviz_direct_conv2d_f32(
                cython.cast(cython.p_float, source), cython.cast(cython.p_float, w),
                cython.cast(cython.p_float, b), cython.cast(cython.p_float, target),
                cython.address(plan), cython.cast(cython.p_float, spare),
                cython.cast(cython.p_float, repacked), cython.cast(cython.p_Py_ssize_t, offsets))
        else:
            done = gradviz_direct_conv2d_f64(
                cython.cast(cython.p_double, source), cython.cast(cython.p_double, w),
                cython.cast(cython.p_double, b), cython.cast(cython.p_double, target),
                cython.address(plan), cython.cast(cython.p_double, spare),
                cython.cast(cython.p_double, repacked),
                cython.cast(cython.p_Py_ssize_t, offsets))
    return out if done else None


def direct_conv2d_weight_grad_arrays(x, g, kernel_size, geometry):
    """The (O, C, kh, kw) gradient of a 2-D convolution's weight from its C-contiguous float32
    or float64 (N, C, H, W) input ``x`` and (N, O, oh, ow) output gradient ``g`` of that dtype,
    computed directly (Note [Direct convolution backward] in gradviz/ops/_conv.py); None where
    the kernel does not apply (as :func:`direct_conv2d_arrays`)."""
    kind = _float_kind(x)
    if (not cython.compiled or not _DIRECT_CONV or not kind or x.ndim != 4 or _float_kind(g) != kind
            or g.ndim != 4 or g.shape[0] != x.shape[0]):
        return None
    out_channels, channels = g.shape[1], x.shape[1]
    kernel_h, kernel_w = kernel_size
    lanes: cython.Py_ssize_t = 16 if kind == 1 else 8
    grad = np.empty((out_channels, channels, kernel_h, kernel_w), x.dtype)
    done: cython.int = 0
    if cython.compiled:
        plan = cython.declare(gradviz_conv2d)
        plan.batch, plan.channels, plan.height, plan.width = x.shape
        plan.out_channels, plan.out_height, plan.out_width = g.shape[1], g.shape[2], g.shape[3]
        plan.kernel_h, plan.kernel_w = kernel_h, kernel_w
        plan.stride_h, plan.stride_w = geometry.stride
        plan.pad_h, plan.pad_w = geometry.padding
        plan.dilation_h, plan.dilation_w = geometry.dilation
        count: cython.Py_ssize_t = channels * kernel_h * kernel_w
        size: cython.Py_ssize_t = g.shape[2] * g.shape[3]
        stride: cython.Py_ssize_t = (size + lanes - 1) // lanes * lanes
        scratch = _aligned_empty(gradviz_conv2d_weight_scratch(cython.address(plan), lanes),
                                 x.dtype)
        partial = _aligned_empty(gradviz_conv2d_channels_up(out_channels)
                                 * gradviz_conv2d_taps_up(count) * lanes, x.dtype)
        rows = _aligned_empty(0 if stride == size else  # whole vectors: g's own rows
                              gradviz_conv2d_group(cython.address(plan)) * out_channels * stride,
                              x.dtype)
        taps = np.empty(count, np.intp)
        if kind == 1:
            done = gradviz_direct_conv2d_weight_grad_f32(
                cython.cast(cython.p_float, _address(x)), cython.cast(cython.p_float, _address(g)),
                cython.cast(cython.p_float, _address(grad)), cython.address(plan),
                cython.cast(cython.p_float, _address(scratch)),
                cython.cast(cython.p_float, _address(partial)),
                cython.cast(cython.p_float, _address(rows)),
                cython.cast(cython.p_Py_ssize_t, _address(taps)))
        else:
            done = gradviz_direct_conv2d_weight_grad_f64(
                cython.cast(cython.p_double, _address(x)),
                cython.cast(cython.p_double, _address(g)),
                cython.cast(cython.p_double, _address(grad)), cython.address(plan),
                cython.cast(cython.p_double, _address(scratch)),
                cython.cast(cython.p_double, _address(partial)),
                cython.cast(cython.p_double, _address(rows)),
                cython.cast(cython.p_Py_ssize_t, _address(taps)))
    return grad if done else None


def _aligned_empty(n, dtype):
    """An uninitialized (n,) array of ``dtype`` whose data starts on a 64-byte boundary, so
    that the direct convolution's vectors of a 64-byte-multiple layout never straddle two
    cache lines (numpy aligns to 16 bytes)."""
    size = n * np.dtype(dtype).itemsize
    spare = np.empty(size + 64, np.uint8)
    start = (64 - array_address(spare) % 64) % 64
    return spare[start:start + size].view(dtype)


def layer_norm_arrays(x, weight, bias, eps):
    """Layer norm over the last dim of a C-contiguous float32 or float64 ndarray, with optional
    (n,) ``weight`` and ``bias`` of its dtype: ``(out, mean, var, rstd)``, the statistics of
    shape ``x.shape[:-1] + (1,)``, with the bits of the numpy code (Note [Layer norm kernel] in
    gradviz/ops/_nn.py); None where the kernel does not apply."""
    kind = _float_kind(x)
    if not cython.compiled or not kind or x.ndim == 0 or x.size == 0:
        return None
    n: cython.Py_ssize_t = x.shape[x.ndim - 1]
    rows: cython.Py_ssize_t = x.size // n
    dtype = x.dtype
    for parameter in (weight, bias):
        if parameter is not None and (_float_kind(parameter) != kind or parameter.ndim != 1
                                      or parameter.shape[0] != n):
            return None
    out = np.empty(x.shape, dtype)
    stats = np.empty((3, rows), dtype)
    squares = np.empty(n, dtype)
    if cython.compiled:
        w: cython.size_t = 0 if weight is None else gradviz_array_address(weight)
        b: cython.size_t = 0 if bias is None else gradviz_array_address(bias)
        source: cython.size_t = gradviz_array_address(x)
        target: cython.size_t = gradviz_array_address(out)
        found: cython.size_t = gradviz_array_address(stats)
        spare: cython.size_t = gradviz_array_address(squares)
        if kind == 1:
            gradviz_layer_norm_f32(
                cython.cast(cython.p_float, source), rows, n, cython.cast(cython.float, eps),
                cython.cast(cython.p_float, w), cython.cast(cython.p_float, b),
                cython.cast(cython.p_float, target), cython.cast(cython.p_float, found),
                cython.cast(cython.p_float, found) + rows,
                cython.cast(cython.p_float, found) + 2 * rows, cython.cast(cython.p_float, spare))
        else:
            gradviz_layer_norm_f64(
                cython.cast(cython.p_double, source), rows, n, cython.cast(cython.double, eps),
                cython.cast(cython.p_double, w), cython.cast(cython.p_double, b),
                cython.cast(cython.p_double, target), cython.cast(cython.p_double, found),
                cython.cast(cython.p_double, found) + rows,
                cython.cast(cython.p_double, found) + 2 * rows,
                cython.cast(cython.p_double, spare))
    kept = x.shape[:x.ndim - 1] + (1,)
    return out, stats[0].reshape(kept), stats[1].reshape(kept), stats[2].reshape(kept)


def _norm_backward_operands(x, g, weight, mean, rstd, needs, stats: cython.Py_ssize_t,
                            width: cython.Py_ssize_t, scratch: cython.Py_ssize_t):
    """For the normalization backward kernels: ``(kind, grad_x, grad_w, grad_b, scratch)``
    with the gradients that ``needs`` asks for allocated (``width`` entries for the weight's
    and bias's), when ``x`` and ``g`` are C-contiguous float arrays of one shape and dtype, at
    least 2-D, ``mean`` and ``rstd`` hold ``stats`` entries and ``weight`` (optional)
    ``width``, all of that dtype; else None."""
    kind = _float_kind(x)
    if (not cython.compiled or not kind or x.ndim < 2 or x.size == 0 or _float_kind(g) != kind
            or g.shape != x.shape):
        return None
    for stat in (mean, rstd):
        if _float_kind(stat) != kind or stat.size != stats:
            return None
    if weight is not None and (_float_kind(weight) != kind or weight.size != width):
        return None
    dtype = x.dtype
    return (kind, np.empty(x.shape, dtype) if needs[0] else None,
            np.empty(width, dtype) if needs[1] else None,
            np.empty(width, dtype) if needs[2] else None, np.empty(scratch, dtype))


@cython.cfunc
def _address(a) -> cython.size_t:
    """The data address of an ndarray, 0 for None (a NULL the kernels read as absent)."""
    return 0 if a is None else gradviz_array_address(a)


def layer_norm_backward_arrays(x, g, weight, mean, rstd, needs):
    """The gradients ``(input, weight, bias)`` of a layer norm over the last dim (None where
    ``needs``, three flags, says no) from C-contiguous float32 or float64 ``x`` and ``g`` of
    one shape (at least 2-D), the optional (n,) ``weight`` and the forward's kept ``mean`` and
    ``rstd``, with the bits of the numpy code (Note [Layer norm kernel] in
    gradviz/ops/_nn.py); None where the kernel does not apply."""
    if type(x) is not np.ndarray or x.ndim < 2 or x.size == 0:
        return None
    n: cython.Py_ssize_t = x.shape[x.ndim - 1]
    rows: cython.Py_ssize_t = x.size // n
    found = _norm_backward_operands(x, g, weight, mean, rstd, needs, rows, n, 3 * n)
    if found is None or (weight is not None and weight.ndim != 1):
        return None
    kind, grad_x, grad_w, grad_b, scratch = found
    if cython.compiled:
        if kind == 1:
            gradviz_layer_norm_backward_f32(
                cython.cast(cython.p_float, _address(x)), cython.cast(cython.p_float, _address(g)),
                rows, n, cython.cast(cython.p_float, _address(weight)),
                cython.cast(cython.p_float, _address(mean)),
                cython.cast(cython.p_float, _address(rstd)),
                cython.cast(cython.p_float, _address(grad_x)),
                cython.cast(cython.p_float, _address(grad_w)),
                cython.cast(cython.p_float, _address(grad_b)),
                cython.cast(cython.p_float, _address(scratch)))
        else:
            gradviz_layer_norm_backward_f64(
                cython.cast(cython.p_double, _address(x)),
                cython.cast(cython.p_double, _address(g)), rows, n,
                cython.cast(cython.p_double, _address(weight)),
                cython.cast(cython.p_double, _address(mean)),
                cython.cast(cython.p_double, _address(rstd)),
                cython.cast(cython.p_double, _address(grad_x)),
                cython.cast(cython.p_double, _address(grad_w)),
                cython.cast(cython.p_double, _address(grad_b)),
                cython.cast(cython.p_double, _address(scratch)))
    return grad_x, grad_w, grad_b


def batch_norm_backward_arrays(x, g, weight, mean, rstd, needs):
    """The gradients ``(input, weight, bias)`` of a training batch norm (None where ``needs``
    says no) from C-contiguous float32 or float64 (N, C, ...) ``x`` and ``g``, the optional (C,)
    ``weight`` and the forward's kept per-channel ``mean`` and ``rstd``, with the bits of the
    numpy code (Note [Layer norm kernel] in gradviz/ops/_nn.py); None where the kernel does not
    apply."""
    if type(x) is not np.ndarray or x.ndim < 2 or x.size == 0:
        return None
    batch: cython.Py_ssize_t = x.shape[0]
    channels: cython.Py_ssize_t = x.shape[1]
    plane: cython.Py_ssize_t = x.size // (batch * channels)
    if plane > 8192:  # numpy's reduction may split longer planes; keep its own code there
        return None
    found = _norm_backward_operands(x, g, weight, mean, rstd, needs, channels, channels,
                                    4 * plane)
    if found is None:
        return None
    kind, grad_x, grad_w, grad_b, scratch = found
    if cython.compiled:
        if kind == 1:
            gradviz_batch_norm_backward_f32(
                cython.cast(cython.p_float, _address(x)), cython.cast(cython.p_float, _address(g)),
                batch, channels, plane, cython.cast(cython.p_float, _address(weight)),
                cython.cast(cython.p_float, _address(mean)),
                cython.cast(cython.p_float, _address(rstd)),
                cython.cast(cython.p_float, _address(grad_x)),
                cython.cast(cython.p_float, _address(grad_w)),
                cython.cast(cython.p_float, _address(grad_b)),
                cython.cast(cython.p_float, _address(scratch)))
        else:
            gradviz_batch_norm_backward_f64(
                cython.cast(cython.p_double, _address(x)),
                cython.cast(cython.p_double, _address(g)), batch, channels, plane,
                cython.cast(cython.p_double, _address(weight)),
                cython.cast(cython.p_double, _address(mean)),
                cython.cast(cython.p_double, _address(rstd)),
                cython.cast(cython.p_double, _address(grad_x)),
                cython.cast(cython.p_double, _address(grad_w)),
                cython.cast(cython.p_double, _address(grad_b)),
                cython.cast(cython.p_double, _address(scratch)))
    return grad_x, grad_w, grad_b


def softmax_arrays(x):
    """Softmax over the last dim of a C-contiguous float32 or float64 ndarray: the shift and the
    scaling compiled, exp numpy's, the bits of the numpy code (Note [Softmax kernels] in
    gradviz/ops/_activation.py); None where the kernel does not apply."""
    kind = _float_kind(x)
    if not cython.compiled or not kind or x.ndim == 0 or x.size == 0:
        return None
    n: cython.Py_ssize_t = x.shape[x.ndim - 1]
    rows: cython.Py_ssize_t = x.size // n
    out = np.empty(x.shape, x.dtype)
    if cython.compiled:
        source: cython.size_t = gradviz_array_address(x)
        target: cython.size_t = gradviz_array_address(out)
        if kind == 1:
            gradviz_softmax_shift_f32(cython.cast(cython.p_float, source), rows, n,
                                      cython.cast(cython.p_float, target))
        else:
            gradviz_softmax_shift_f64(cython.cast(cython.p_double, source), rows, n,
                                      cython.cast(cython.p_double, target))
        np.exp(out, out=out)
        if kind == 1:
            gradviz_softmax_scale_f32(cython.cast(cython.p_float, target), rows, n)
        else:
            gradviz_softmax_scale_f64(cython.cast(cython.p_double, target), rows, n)
    return out


def log_softmax_arrays(x):
    """log_softmax over the last dim of a C-contiguous float32 or float64 ndarray: the shift,
    the row sums and the subtraction compiled, exp and log numpy's, the bits of the numpy code
    (Note [Softmax kernels] in gradviz/ops/_activation.py); None where the kernel does not
    apply."""
    kind = _float_kind(x)
    if not cython.compiled or not kind or x.ndim == 0 or x.size == 0:
        return None
    n: cython.Py_ssize_t = x.shape[x.ndim - 1]
    rows: cython.Py_ssize_t = x.size // n
    out = np.empty(x.shape, x.dtype)
    sums = np.empty(rows, x.dtype)
    if cython.compiled:
        source: cython.size_t = gradviz_array_address(x)
        target: cython.size_t = gradviz_array_address(out)
        totals: cython.size_t = gradviz_array_address(sums)
        if kind == 1:
            gradviz_softmax_shift_f32(cython.cast(cython.p_float, source), rows, n,
                                      cython.cast(cython.p_float, target))
        else:
            gradviz_softmax_shift_f64(cython.cast(cython.p_double, source), rows, n,
                                      cython.cast(cython.p_double, target))
        exps = np.exp(out)
        exp_address: cython.size_t = gradviz_array_address(exps)
        if kind == 1:
            gradviz_row_sums_f32(cython.cast(cython.p_float, exp_address), rows, n,
                                 cython.cast(cython.p_float, totals))
        else:
            gradviz_row_sums_f64(cython.cast(cython.p_double, exp_address), rows, n,
                                 cython.cast(cython.p_double, totals))
        np.log(sums, out=sums)
        if kind == 1:
            gradviz_subtract_rows_f32(cython.cast(cython.p_float, target),
                                      cython.cast(cython.p_float, totals), rows, n)
        else:
            gradviz_subtract_rows_f64(cython.cast(cython.p_double, target),
                                      cython.cast(cython.p_double, totals), rows, n)
    return out


_I64_DTYPE = np.dtype(np.int64)


def add_rows_arrays(out, index, values) -> bool:
    """``add_rows(out, index, values)`` (gradviz/ops/_scatter_add.py) in place with the bits
    of its sums of rounds, which it runs for rows of at least 16 elements (the caller checks
    the width): a C-contiguous int64 vector ``index`` into the first axis of a C-contiguous
    float32 or float64 ndarray ``out`` of 2+ dims, C-contiguous ``values`` of its dtype and
    shape ``index.shape + out.shape[1:]`` (Note [Adding rows in order]). False, nothing
    written, elsewhere (an index out of range, a target taking most entries, a NaN value)."""
    kind = _float_kind(out)
    if (not cython.compiled or not kind or out.ndim < 2 or _float_kind(values) != kind
            or type(index) is not np.ndarray or index.dtype != _I64_DTYPE or index.ndim != 1
            or not index.flags.c_contiguous or values.shape != index.shape + out.shape[1:]):
        return False
    rows: cython.Py_ssize_t = out.shape[0]
    count: cython.Py_ssize_t = index.shape[0]
    width: cython.Py_ssize_t = out.size // rows if rows else 0
    counts = np.zeros(rows, np.intp)
    done: cython.int = -1
    if cython.compiled:
        target: cython.size_t = gradviz_array_address(out)
        positions: cython.size_t = gradviz_array_address(index)
        source: cython.size_t = gradviz_array_address(values)
        tally: cython.size_t = gradviz_array_address(counts)
        if kind == 1:
            done = gradviz_add_rows_f32(cython.cast(cython.p_float, target), rows,
                                        cython.cast(cython.p_longlong, positions), count,
                                        cython.cast(cython.p_float, source), width,
                                        cython.cast(cython.pointer(cython.Py_ssize_t), tally))
        else:
            done = gradviz_add_rows_f64(cython.cast(cython.p_double, target), rows,
                                        cython.cast(cython.p_longlong, positions), count,
                                        cython.cast(cython.p_double, source), width,
                                        cython.cast(cython.pointer(cython.Py_ssize_t), tally))
    return done == 0


def softmax_backward_arrays(y, g):
    """``y * (g - sum(g * y))`` over the last dim of C-contiguous float32 or float64 ndarrays
    of one shape, the bits of the numpy code; None where the kernel does not apply."""
    kind = _float_kind(y)
    if (not cython.compiled or not kind or y.ndim == 0 or y.size == 0
            or _float_kind(g) != kind or g.shape != y.shape):
        return None
    n: cython.Py_ssize_t = y.shape[y.ndim - 1]
    rows: cython.Py_ssize_t = y.size // n
    out = np.empty(y.shape, y.dtype)
    scratch = np.empty(n, y.dtype)
    if cython.compiled:
        source: cython.size_t = gradviz_array_address(y)
        gradient: cython.size_t = gradviz_array_address(g)
        target: cython.size_t = gradviz_array_address(out)
        spare: cython.size_t = gradviz_array_address(scratch)
        if kind == 1:
            gradviz_softmax_backward_f32(
                cython.cast(cython.p_float, source), cython.cast(cython.p_float, gradient), rows,
                n, cython.cast(cython.p_float, target), cython.cast(cython.p_float, spare))
        else:
            gradviz_softmax_backward_f64(
                cython.cast(cython.p_double, source), cython.cast(cython.p_double, gradient),
                rows, n, cython.cast(cython.p_double, target),
                cython.cast(cython.p_double, spare))
    return out


@cython.cfunc
def _float32_rows(a, batch: cython.Py_ssize_t, width: cython.Py_ssize_t) -> tuple:
    """``(address, row stride in entries)`` of a float32 ndarray of shape (batch, width)
    whose rows are contiguous (a column slice of a wider array qualifies), else (0, 0)."""
    if (type(a) is not np.ndarray or a.dtype != _F32_DTYPE or a.ndim != 2
            or a.shape[0] != batch or a.shape[1] != width):
        return 0, 0
    strides = a.strides
    if width > 1 and strides[1] != 4:
        return 0, 0
    if batch > 1 and (strides[0] % 4 or strides[0] < 4 * width):
        return 0, 0
    return array_address(a), strides[0] // 4


def lstm_step_backward(i, f, g, o, c_prev, tanh_c, dh, dc):
    """``(dz, dc_out)`` of one LSTM time step's backward (Note [LSTM step kernel] in
    gradviz/ops/_lstm_layer.py) from (batch, hidden) float32 arrays with contiguous rows (``i``,
    ``f`` and ``o`` column blocks of the gate activations), ``dc`` possibly None; None where the
    kernel does not apply (interpreted, other dtypes or layouts)."""
    if not cython.compiled or type(i) is not np.ndarray or i.ndim != 2:
        return None
    batch: cython.Py_ssize_t = i.shape[0]
    hidden: cython.Py_ssize_t = i.shape[1]
    if hidden == 0 or batch == 0:
        return None
    found = []
    for a in (i, f, g, o, c_prev, tanh_c, dh):
        rows = _float32_rows(a, batch, hidden)
        if rows[0] == 0:
            return None
        found.append(rows)
    dc_address, dc_row = (0, 0) if dc is None else _float32_rows(dc, batch, hidden)
    if dc is not None and not dc_address:
        return None
    dz = np.empty((batch, 4 * hidden), np.float32)
    dc_out = np.empty((batch, hidden), np.float32)
    if cython.compiled:
        step = cython.declare(gradviz_lstm_step)
        step.batch, step.hidden = batch, hidden
        step.i = cython.cast(cython.p_float, cython.cast(cython.size_t, found[0][0]))
        step.f = cython.cast(cython.p_float, cython.cast(cython.size_t, found[1][0]))
        step.g = cython.cast(cython.p_float, cython.cast(cython.size_t, found[2][0]))
        step.o = cython.cast(cython.p_float, cython.cast(cython.size_t, found[3][0]))
        step.c_prev = cython.cast(cython.p_float, cython.cast(cython.size_t, found[4][0]))
        step.tanh_c = cython.cast(cython.p_float, cython.cast(cython.size_t, found[5][0]))
        step.dh = cython.cast(cython.p_float, cython.cast(cython.size_t, found[6][0]))
        step.dh_add = cython.NULL
        step.dc = cython.cast(cython.p_float, cython.cast(cython.size_t, dc_address))
        step.i_row, step.f_row, step.g_row, step.o_row = (found[0][1], found[1][1],
                                                          found[2][1], found[3][1])
        step.c_prev_row, step.tanh_c_row, step.dh_row = found[4][1], found[5][1], found[6][1]
        step.dc_row, step.dh_add_row = dc_row, 0
        step.dz = cython.cast(cython.p_float, cython.cast(cython.size_t, gradviz_array_address(dz)))
        step.dc_out = cython.cast(cython.p_float,
                                  cython.cast(cython.size_t, gradviz_array_address(dc_out)))
        gradviz_lstm_step_backward_f32(cython.address(step))
    return dz, dc_out


def _lstm_enable() -> cython.bint:
    """Whether the LSTM forward kernel may run: compiled, and numpy's float32 exp and tanh
    loops found (gradviz_ext/c/ufunc_loops.h)."""
    if cython.compiled:
        return gradviz_lstm_enable(np.exp, np.tanh, np.ufunc, _F32_DTYPE.num) == 1
    return False


_LSTM_KERNELS = _lstm_enable()


@cython.cfunc
def _floats(address: cython.size_t, offset: cython.Py_ssize_t) -> cython.p_float:
    """The float32 at ``offset`` entries past ``address``."""
    return cython.cast(cython.p_float, address) + offset


def lstm_layer_forward(projected, w_hh, b_hh, h0, c0, reverse: cython.bint,
                       swapped: cython.bint):
    """One float32 LSTM layer and direction through time (Note [LSTM forward kernel] in
    gradviz/ops/_lstm_layer.py) from the projected input ``projected`` (T, B, 4 H),
    C-contiguous, and the state ``(h0, c0)`` (B, H): ``(gates, g, cells, tanh_cells, hs)``, the
    sigmoids of all four gate blocks (T, B, 4 H), then the cell input's tanh, the cells, their
    tanh and the outputs, (T, B, H) each, the bits of the numpy code. Each step's product is
    ``h @ w_hh.T`` as numpy writes it, or ``w_hh @ h.T`` when ``swapped`` (the caller has
    checked that both give the same bits); None where the kernel does not apply."""
    if not cython.compiled or not _LSTM_KERNELS:
        return None
    if (type(projected) is not np.ndarray or projected.dtype != _F32_DTYPE
            or projected.ndim != 3 or not projected.flags.c_contiguous
            or type(w_hh) is not np.ndarray or w_hh.dtype != _F32_DTYPE or w_hh.ndim != 2
            or type(h0) is not np.ndarray or h0.dtype != _F32_DTYPE):
        return None
    length: cython.Py_ssize_t = projected.shape[0]
    batch: cython.Py_ssize_t = projected.shape[1]
    hidden: cython.Py_ssize_t = w_hh.shape[1]
    width: cython.Py_ssize_t = 4 * hidden
    if (length == 0 or batch == 0 or hidden == 0 or projected.shape[2] != width
            or w_hh.shape[0] != width or h0.shape != (batch, hidden)):
        return None
    cell0 = _float32_rows(c0, batch, hidden)
    if cell0[0] == 0:
        return None
    bias_address: cython.size_t = 0
    if b_hh is not None:
        if (type(b_hh) is not np.ndarray or b_hh.dtype != _F32_DTYPE or b_hh.shape != (width,)
                or not b_hh.flags.c_contiguous):
            return None
        bias_address = gradviz_array_address(b_hh)
    gates = np.empty((length, batch, width), np.float32)
    g = np.empty((length, batch, hidden), np.float32)
    cells = np.empty((length, batch, hidden), np.float32)
    tanh_cells = np.empty((length, batch, hidden), np.float32)
    hs = np.empty((length, batch, hidden), np.float32)
    swapped = swapped and w_hh.flags.c_contiguous
    w_hh_t = w_hh.T
    recurrent_swapped = np.empty((width, batch), np.float32) if swapped else None
    recurrent_written = None
    if cython.compiled:
        step = cython.declare(gradviz_lstm_step_in)
        step.batch, step.hidden = batch, hidden
        step.bias = _floats(bias_address, 0) if b_hh is not None else cython.NULL
        step.projected_row, step.c_prev_row = width, cell0[1]
        step.c_prev = _floats(cell0[0], 0)
        projected_at: cython.size_t = gradviz_array_address(projected)
        gates_at: cython.size_t = gradviz_array_address(gates)
        g_at: cython.size_t = gradviz_array_address(g)
        cells_at: cython.size_t = gradviz_array_address(cells)
        tanh_at: cython.size_t = gradviz_array_address(tanh_cells)
        hs_at: cython.size_t = gradviz_array_address(hs)
        h = h0
        n: cython.Py_ssize_t
        t: cython.Py_ssize_t
        for n in range(length):
            t = length - 1 - n if reverse else n
            if swapped and h.flags.c_contiguous:  # h0 of another layout: as written
                np.matmul(w_hh, h.T, out=recurrent_swapped)
                step.recurrent = _floats(gradviz_array_address(recurrent_swapped), 0)
                step.recurrent_row, step.recurrent_col = 1, batch
            else:
                if recurrent_written is None:
                    recurrent_written = np.empty((batch, width), np.float32)
                np.matmul(h, w_hh_t, out=recurrent_written)
                step.recurrent = _floats(gradviz_array_address(recurrent_written), 0)
                step.recurrent_row, step.recurrent_col = width, 1
            step.projected = _floats(projected_at, t * batch * width)
            step.gates = _floats(gates_at, t * batch * width)
            step.g = _floats(g_at, t * batch * hidden)
            step.c = _floats(cells_at, t * batch * hidden)
            step.tanh_c = _floats(tanh_at, t * batch * hidden)
            step.h = _floats(hs_at, t * batch * hidden)
            gradviz_lstm_step_forward_f32(cython.address(step))
            step.c_prev, step.c_prev_row = step.c, hidden
            h = hs[t]
    return gates, g, cells, tanh_cells, hs


@cython.cfunc
def _float32_steps(a, shape: tuple):
    """``a`` as a C-contiguous float32 array of ``shape`` (a copy if it is laid out otherwise:
    the same values), or None when it is not a float32 ndarray of that shape."""
    if type(a) is not np.ndarray or a.dtype != _F32_DTYPE or a.shape != shape:
        return None
    return np.ascontiguousarray(a)


def lstm_layer_backward(gates, g, cells, tanh_cells, c0, w_hh, g_out, g_hy, g_cy,
                        reverse: cython.bint):
    """Backward through time of one float32 LSTM layer and direction from the arrays of
    :func:`lstm_layer_forward` (Note [LSTM step kernel] in gradviz/ops/_lstm_layer.py):
    ``(dz, dh0, dc0)``, the gate inputs' gradients (T, B, 4 H) and the initial state's, the
    bits of the numpy code; ``g_out`` (T, B, H), ``g_hy`` and ``g_cy`` (B, H) may be None. None
    where the kernel does not apply."""
    if not cython.compiled:
        return None
    length: cython.Py_ssize_t = gates.shape[0]
    batch: cython.Py_ssize_t = gates.shape[1]
    hidden: cython.Py_ssize_t = g.shape[2]
    width: cython.Py_ssize_t = 4 * hidden
    state = (batch, hidden)
    cell0 = _float32_rows(c0, batch, hidden)
    if cell0[0] == 0 or type(w_hh) is not np.ndarray or w_hh.dtype != _F32_DTYPE:
        return None
    outs = None if g_out is None else _float32_steps(g_out, (length, batch, hidden))
    dh = None if g_hy is None else _float32_steps(g_hy, state)
    dc = None if g_cy is None else _float32_steps(g_cy, state)
    if ((g_out is not None and outs is None) or (g_hy is not None and dh is None)
            or (g_cy is not None and dc is None)):
        return None
    dz = np.empty((length, batch, width), np.float32)
    spare_dh = np.empty(state, np.float32)
    spare_dc = [np.empty(state, np.float32), np.empty(state, np.float32)]
    if cython.compiled:
        step = cython.declare(gradviz_lstm_step)
        step.batch, step.hidden = batch, hidden
        step.i_row = step.f_row = step.o_row = width
        step.g_row = step.tanh_c_row = step.dh_row = step.dh_add_row = step.dc_row = hidden
        gates_at: cython.size_t = gradviz_array_address(gates)
        g_at: cython.size_t = gradviz_array_address(g)
        cells_at: cython.size_t = gradviz_array_address(cells)
        tanh_at: cython.size_t = gradviz_array_address(tanh_cells)
        dz_at: cython.size_t = gradviz_array_address(dz)
        outs_at: cython.size_t = 0 if outs is None else gradviz_array_address(outs)
        n: cython.Py_ssize_t
        t: cython.Py_ssize_t
        for n in range(length):
            t = n if reverse else length - 1 - n
            step.i = _floats(gates_at, t * batch * width)
            step.f = step.i + hidden
            step.g = _floats(g_at, t * batch * hidden)
            step.o = step.i + 3 * hidden
            step.tanh_c = _floats(tanh_at, t * batch * hidden)
            if n == length - 1:
                step.c_prev, step.c_prev_row = _floats(cell0[0], 0), cell0[1]
            else:
                step.c_prev = _floats(cells_at, (t + 1 if reverse else t - 1) * batch * hidden)
                step.c_prev_row = hidden
            step.dh_add = cython.NULL
            if dh is None and outs is None:  # nothing reaches this step's h
                dh = tanh_cells[t] * 0
            if dh is None:
                step.dh = _floats(outs_at, t * batch * hidden)
            else:
                step.dh = _floats(gradviz_array_address(dh), 0)
                if outs is not None:
                    step.dh_add = _floats(outs_at, t * batch * hidden)
            step.dc = cython.NULL if dc is None else _floats(gradviz_array_address(dc), 0)
            step.dz = _floats(dz_at, t * batch * width)
            step.dc_out = _floats(gradviz_array_address(spare_dc[n % 2]), 0)
            gradviz_lstm_step_backward_f32(cython.address(step))
            dc = spare_dc[n % 2]
            dh, spare_dh = np.matmul(dz[t], w_hh, out=spare_dh), dh
            if spare_dh is None or spare_dh is g_hy:
                spare_dh = np.empty(state, np.float32)
    return dz, dh, dc


def _small_add_into(a, b) -> cython.bint:
    """``a += b`` by the small kernel when it covers the arrays (the engine's input buffers,
    Note [Small kernels]); False when it does not, and always interpreted."""
    if cython.compiled:
        return gradviz_small_add_into(a, b) == 1
    return False


def _add_arrays(a, b):
    """``a + b`` of two arrays of one float dtype and shape, as the engine sums two gradients
    held as arrays (Note [Gradients as arrays] in _task.py): the bits of ``add``."""
    return _arith_kernel(KERNEL_ADD, a, b)


@cython.cfunc
def _arith_kernel(kernel: cython.int, a, b):
    """``a (kernel) b`` by a small kernel when it covers the operands, else by the ufunc
    (Note [Small kernels]); numpy's warnings are whatever the caller set."""
    if cython.compiled:
        result = gradviz_small_arith(kernel, a, b)
        if result is not None:
            return result
        result = gradviz_small_rows(kernel, a, b)  # a matrix and a row vector
        if result is not None:
            return result
    return _ufunc(kernel, a, b)


@cython.cfunc
def _ufunc(kernel: cython.int, a, b):
    """``a (kernel) b`` by numpy's ufunc."""
    if kernel == KERNEL_MUL:
        return _np_multiply(a, b)
    if kernel == KERNEL_DIV:
        return _np_divide(a, b)
    if kernel == KERNEL_ADD:
        return _np_add(a, b)
    if kernel == KERNEL_SUB:
        return _np_subtract(a, b)
    return _np_negative(a)


@cython.cfunc
def _forward_kernel(kernel: cython.int, arrays: list, attrs: dict):
    """An arithmetic op's forward as one small kernel or ufunc call, or None to use the op's
    Python forward (Note [Compiled kernels]). A shape error goes to the Python forward, which
    explains it."""
    if (kernel == KERNEL_ADD or kernel == KERNEL_SUB) and attrs.get("alpha", 1) != 1:
        return None
    try:
        return _arith_kernel(kernel, arrays[0], arrays[1] if kernel != KERNEL_NEG else None)
    except (ValueError, OverflowError):  # shape errors; ints beyond the dtype (they wrap)
        return None


_NO_EDGE = (None, 0)
# the entry of OpNode._kept_inputs for an input the op did not save: a singleton no op takes
# as an input, of a static type, so a tuple of it and numbers is not GC-tracked (Note
# [Compact nodes])
_NOT_SAVED = NotImplemented
_NEEDS_ONE = (True,)
_NEEDS_PAIRS = ((False, False), (True, False), (False, True), (True, True))


@cython.cfunc
def _saves_for(op: OpSpec, needs: tuple, mask: cython.Py_ssize_t) -> tuple:
    """``op.saves(needs)``, remembered per ``needs`` for calls of one to three operands:
    ``mask`` is the cache slot, 0 for one operand, 4 + bits for two and 8 + bits for three
    (bit i set when input i needs grad; one op may be called with two or three operands, as
    clamp with tensor bounds), -1 for other calls. A ``saves`` rule depends on ``needs`` alone
    (gradviz.ops.Op), so its answer can be reused."""
    if mask < 0:
        return tuple(op.saves(needs))
    cache: list = op._saves_cache
    if cache is None:
        cache = [None] * 16
        op._saves_cache = cache
    found = cache[mask]
    if found is None:
        found = tuple(op.saves(needs))
        cache[mask] = found
    return found


def kernel_quiet_context():
    """The context the compiled kernels run their ufunc in (None interpreted or before
    numpy 2); for tests and inspection."""
    return _quiet_context if cython.compiled else None


@cython.cfunc
def _quiet_kernel(kernel: cython.int, arrays: list, attrs: dict):
    """``_forward_kernel`` with numpy's warnings off, by entering ``_quiet_context`` (Note
    [Compiled kernels]); None when the context is in use by another thread (numpy lets go
    of the GIL in long loops), and the caller silences numpy the usual way."""
    if not cython.compiled or _quiet_context is None:
        return None
    if (kernel == KERNEL_ADD or kernel == KERNEL_SUB) and attrs.get("alpha", 1) != 1:
        return None
    a = arrays[0]
    b = arrays[1] if kernel != KERNEL_NEG else None
    result = gradviz_small_arith(kernel, a, b)  # Note [Small kernels]: never warns
    if result is not None:
        return result
    result = gradviz_small_rows(kernel, a, b)  # a matrix and a row vector; never warns
    if result is not None:
        return result
    try:
        PyContext_Enter(_quiet_context)
    except RuntimeError:  # "already entered": another thread is inside a kernel
        return None
    try:
        return _ufunc(kernel, a, b)
    except (ValueError, OverflowError):  # as _forward_kernel: the Python forward explains
        return None
    finally:
        PyContext_Exit(_quiet_context)


@cython.cfunc
def _new_node(op: OpSpec, edges, metas, needs, attrs):
    node: OpNode
    if cython.compiled:  # the class's tp_new directly (Note [Node classes])
        node = gradviz_new_instance(op.node_class)
    else:
        node = OpNode.__new__(op.node_class)
    if edges is not None:
        init_node(node, edges, metas)
    node.op = op
    node.needs_input_grad = needs
    node.attrs = attrs
    node._kept_inputs = None
    node._saved_output = None
    return node


# Note [Compact nodes]
# --------------------
# A long forward graph keeps, per recorded op, only what the backward needs: the node, its
# edges and what it saved (the op's output tensor and array are freed when the user drops
# them). Python objects are the cost: each is tens of bytes plus its header, and each
# GC-tracked one is walked by every full collection while the graph lives. So a node keeps
#   - its saved inputs as a tuple by input index (``_kept_inputs``, ``_NOT_SAVED`` where
#     an input was not saved), not a dict: 56 bytes for a two-operand op instead of 224,
#     and untracked by the collector once it saw it holds only numbers (the sentinel is
#     ``NotImplemented``, of a static type; no op takes it as an input). ``_saved_inputs``
#     builds the dict on each read for the code that inspects nodes;
#   - the one-element metadata tuple of the last output shape and dtype, shared by every
#     node with that metadata (a chain of ops shares one, as it shares the InputMeta);
#     likewise a saved-inputs tuple of numbers only, when the last one holds the same
#     objects (tuples are immutable and numbers compare by identity here, so sharing one
#     changes nothing a reader can see).
# bench/memory.py measures bytes and GC-tracked objects per op.


def _meta(tensor):
    """The InputMeta of an op's output. Built-in nodes never change their metadata, so
    consecutive outputs of the same shape and dtype share one (a chain of ops makes one)."""
    global _last_meta, _last_metas
    t: TensorBase = cython.cast(TensorBase, tensor)  # an op's output: a tensor
    data = t._data
    dtype = _dtype_of(data)
    last: InputMeta = _last_meta
    if last is not None and last.np_dtype is dtype and _has_shape(data, last.shape):
        return last
    shape = data.shape
    meta: InputMeta = InputMeta.__new__(InputMeta)
    meta.shape = shape
    meta.np_dtype = dtype
    meta.dtype = _dtypes_by_numpy[dtype]
    _last_meta = meta
    _last_metas = (meta,)
    return meta


@cython.cfunc
def _one_meta(tensor) -> tuple:
    """``(_meta(tensor),)``, the metadata of a one-output node: the same tuple as the last
    node's when the meta is (Note [Compact nodes])."""
    meta: InputMeta = _meta(tensor)
    metas: tuple = _last_metas
    # checked, not assumed: another thread may have set _last_meta in between
    if metas is not None and metas[0] is meta:
        return metas
    return (meta,)


_last_meta = None
_last_metas = None


@cython.cfunc
def _kept_tuple(inputs: tuple, input_indices) -> tuple:
    """An op node's ``_kept_inputs``: SavedTensors for the saved tensors, saved numbers as
    they are, ``_NOT_SAVED`` elsewhere. A tuple of numbers only is the last one again when
    it holds the same objects (``y * 0.5`` in a loop keeps one tuple; Note [Compact nodes])."""
    global _last_kept
    n: cython.Py_ssize_t = len(inputs)
    i: cython.Py_ssize_t
    kept = [_NOT_SAVED] * n
    plain: cython.bint = True
    for i in input_indices:
        x = inputs[i]
        if _is_tensor(x):
            kept[i] = save_tensor(cython.cast(TensorBase, x), False)
            plain = False
        else:
            kept[i] = x
    if not plain:
        return tuple(kept)
    last: tuple = _last_kept
    if last is not None and len(last) == n:
        for i in range(n):
            if last[i] is not kept[i]:
                break
        else:
            return last
    _last_kept = tuple(kept)
    return _last_kept


_last_kept = None


@cython.cfunc
def _quiet_begin():
    """Silence numpy's floating-point warnings; None if they already are (a graph task
    silences them for its whole run), else the token that ``_quiet_end`` restores."""
    if cython.compiled:  # the C API: no attribute lookups or bound methods
        if get_value(_errstate_var) is _errstate_quiet:
            return None
        return PyContextVar_Set(_errstate_var, _errstate_quiet)
    if _errstate_var.get() is _errstate_quiet:
        return None
    return _errstate_var.set(_errstate_quiet)


@cython.cfunc
def _quiet_end(token):
    if cython.compiled:
        PyContextVar_Reset(_errstate_var, token)
    else:
        _errstate_var.reset(token)


@cython.cfunc
def _call_forward(forward, arrays: list, attrs: dict):
    # one and two operands without attributes are most ops: call without building a tuple
    if not attrs:
        if len(arrays) == 2:
            return forward(arrays[0], arrays[1])
        if len(arrays) == 1:
            return forward(arrays[0])
    return forward(*arrays, **attrs)


@cython.cfunc
def _run_forward(op: OpSpec, kernel: cython.int, arrays: list, attrs: dict):
    """The op's forward on numpy arrays: a compiled kernel where one applies, else the op's
    Python forward, quiet (no numpy warnings) for quiet ops."""
    result = None
    if kernel != KERNEL_NONE:  # Note [Compiled kernels]; kernels are quiet ops
        result = _quiet_kernel(kernel, arrays, attrs)
    if result is not None:
        return result
    if not op.quiet:
        return _call_forward(op.forward, arrays, attrs)
    # like torch: inf/nan results, no numpy warnings
    if _errstate_var is None:
        with np.errstate(all="ignore"):
            return _call_forward(op.forward, arrays, attrs)
    token = _quiet_begin()
    try:
        if kernel != KERNEL_NONE:
            result = _forward_kernel(kernel, arrays, attrs)
        if result is None:
            result = _call_forward(op.forward, arrays, attrs)
    finally:
        if token is not None:
            _quiet_end(token)
    return result


@cython.cfunc
def _not_an_operand(x, n: cython.Py_ssize_t) -> cython.bint:
    """Whether ``x``, an op's first input and no tensor, is refused as in torch (rather than
    failing in numpy with an error that names no op): None, a str, a list; anything but a numpy
    array when it is the only input (``exp(2.0)``). A number is an operand of a binary op
    (``2 - x`` runs ``sub(2, x)``)."""
    if x is None or isinstance(x, (str, list)):
        return True
    return n == 1 and not isinstance(x, np.ndarray)


def apply(op: OpSpec, *inputs, **attrs):
    """``apply_op(op, inputs, attrs)`` with the inputs and attributes as arguments: the ops
    layer's entry (``gradviz.ops.apply``), compiled so that an op costs no Python frame here."""
    return apply_op(op, inputs, attrs)


def apply_op(op: OpSpec, inputs: tuple, attrs: dict):
    """Run ``op`` forward on ``inputs`` (Tensors or Python numbers) and record its node."""
    n: cython.Py_ssize_t = len(inputs)
    i: cython.Py_ssize_t
    t: TensorBase
    out: TensorBase
    rule: cython.int = op.dtype_rule
    target = None
    converts: cython.bint = False  # whether a tensor operand may need converting to target
    if rule != DTYPE_NONE:
        target = _fast_target(inputs, rule) if rule != DTYPE_CUSTOM else False
        if target is False:
            target = op.dtype(*inputs, **attrs).numpy
            converts = True
    if n and not _is_tensor(inputs[0]) and _not_an_operand(inputs[0], n):
        raise TypeError(f"{op.name}(): argument 'input' must be Tensor, not "
                        f"{type(inputs[0]).__name__}")
    arrays = [None] * n
    for i in range(n):
        x = inputs[i]
        if _is_tensor(x):
            t = cython.cast(TensorBase, x)
            data = t._data
            if converts:
                dtype = data.dtype
                if dtype is not target and dtype != target:
                    data = data.astype(target)
            arrays[i] = data
        elif target is not None and (type(x) is float or type(x) is int):
            arrays[i] = _scalar_array(x, target)  # Note [Scalar operands]
        elif isinstance(x, np.generic):
            arrays[i] = x.item()  # numpy scalars promote like Python scalars, as in torch
        else:
            arrays[i] = x
    kernel: cython.int = op.kernel
    if target is _F16:  # float16 with a number computes in float32 (the op's Python forward)
        kernel = KERNEL_NONE
    if cython.compiled and n and (gradviz_cache_wanted(arrays[0])
                                  or (n > 1 and gradviz_cache_wanted(arrays[1]))):
        previous = gradviz_cache_enter()  # Note [Array cache]
        try:
            result = _run_forward(op, kernel, arrays, attrs)
        finally:
            gradviz_cache_exit(previous)
    else:
        result = _run_forward(op, kernel, arrays, attrs)

    record: cython.bint = False
    needs_mask: cython.Py_ssize_t = 0  # of one or two operands: bit i when input i needs grad
    if op.backward is not None and is_grad_enabled():
        if n <= 2:
            for i in range(n):
                if requires_grad(inputs[i]):
                    needs_mask |= 1 << i
            record = needs_mask != 0
        else:
            for i in range(n):
                if requires_grad(inputs[i]):
                    record = True
                    break

    multiple: cython.bint = isinstance(result, tuple)
    if op.view:  # the strides numpy derived from the base's (Note [Empty tensors' strides])
        outputs = tuple([_tensor_around(r if type(r) is _ndarray else np.asarray(r))
                         for r in (result if multiple else (result,))])
        base = inputs[0]
        chain = base._view_chain + ((op, attrs),)  # how to re-derive it from the root base
        root = base if base._base is None else base._base
        for out in outputs:
            out._version_counter = base._version_counter
            out._base = root
            out._view_chain = chain
            track_view(root, out, base, 0)  # Note [Views after their base changed] (_engine.py)
    elif multiple:
        outputs = tuple([make_tensor(np.asarray(r)) for r in result])
    else:
        out = _wrap(result)
        outputs = (out,)

    if record:
        # one and two operands are most ops: build the tuples without intermediate lists
        # Note [Inline edges] (_engine.py): up to two edges as parts, no tuples
        mask: cython.Py_ssize_t = 0
        edges = None
        first_node = second_node = None
        first_nr: cython.int = 0
        second_nr: cython.int = 0
        if n == 2:
            x = inputs[0]
            y = inputs[1]
            if needs_mask & 1:  # a tensor, then
                mask = 1
                t = cython.cast(TensorBase, x)
                first_node = edge_node(t)
                if first_node is not None and _stored_node(t) is not None:
                    first_nr = t._output_nr
            if needs_mask & 2:
                mask |= 2
                t = cython.cast(TensorBase, y)
                second_node = edge_node(t)
                if second_node is not None and _stored_node(t) is not None:
                    second_nr = t._output_nr
            needs = _NEEDS_PAIRS[mask]
            mask |= 4  # the saves cache's slots of two-operand calls (_saves_for)
        elif n == 1:
            mask = 0
            needs = _NEEDS_ONE
            t = cython.cast(TensorBase, inputs[0])  # recorded: it requires grad, a tensor
            first_node = edge_node(t)
            if first_node is not None and _stored_node(t) is not None:
                first_nr = t._output_nr
        else:
            needs = tuple([requires_grad(x) for x in inputs])
            edges = tuple([gradient_edge(inputs[i]) if needs[i] else _NO_EDGE
                           for i in range(n)])
            mask = -1
            if n == 3:  # addmm (every Linear layer), where, addcmul...
                mask = 8 | (needs[0] is True) | (needs[1] is True) << 1 | (needs[2] is True) << 2
        if multiple:
            metas = tuple([_meta(out) for out in outputs])
        else:
            metas = _one_meta(outputs[0])
        node: OpNode = _new_node(op, edges, metas, needs, attrs)
        if edges is None:
            init_node_edges(node, n, first_node, first_nr, second_node, second_nr, metas)
        if op.saves is not None:
            input_indices, save_output = _saves_for(op, needs, mask)
            if input_indices:  # Note [Compact nodes]: a tuple by input index, not a dict
                node._kept_inputs = _kept_tuple(inputs, input_indices)
        else:
            save_output = False
        nr: cython.Py_ssize_t = 0
        for out in outputs:
            meta: InputMeta = metas[nr]
            dtype = meta.np_dtype  # float32/64 by identity: no attribute lookup per op
            if dtype is _F32 or dtype is _F64 or dtype.kind == "f":
                out.grad_fn = node
                out._output_nr = nr
            nr += 1
        if save_output:
            node._saved_output = save_tensor(outputs[0], True)
        observer = forward_observer()
        if observer is not None:
            observer.node_created(node)

    if _forward_ad is not None:  # a dual level is active (Note [Forward AD hook])
        _forward_ad(op, inputs, attrs, outputs)
    return outputs if multiple else outputs[0]


# --------------------------------------------------------------------------------------
# Arithmetic dunders (Note [Op fast paths]): ``x * 2`` is the most frequent call in teaching
# code, so these methods go straight to ``apply_op`` instead of through the Python wrappers
# in gradviz.ops. Anything unusual (bool tensors, numpy arrays, other types) takes the
# Python path, which owns the error messages.
# --------------------------------------------------------------------------------------

_arith = {}
_NO_ATTRS = {}


def install_arithmetic(**ops_and_fallbacks):
    """Give the dunders their ops (``add``, ``sub``, ``mul``, ``div``, ``neg``) and the Python
    functions that handle everything else (``add_py``, ...)."""
    global _op_add, _op_sub, _op_mul, _op_div, _op_neg
    _arith.update(ops_and_fallbacks)
    _op_add = _arith.get("add")
    _op_sub = _arith.get("sub")
    _op_mul = _arith.get("mul")
    _op_div = _arith.get("div")
    _op_neg = _arith.get("neg")


# the ops themselves, read on every ``x * y`` (C variables when compiled)
_op_add = _op_sub = _op_mul = _op_div = _op_neg = None


@cython.cfunc
def _plain_operand(x) -> cython.bint:
    """A non-bool Tensor, or a Python int/float: the cases the fast path handles."""
    if _is_tensor(x):
        tensor: TensorBase = cython.cast(TensorBase, x)
        dtype = _dtype_of(tensor._data)
        return dtype is _F32 or dtype is _F64 or dtype.kind != "b"
    t = type(x)
    return t is float or t is int


@cython.cfunc
def _unrecorded_binary(op: OpSpec, a, b, attrs: dict):
    """``a (op) b`` for an arithmetic op when nothing is recorded and no dtype changes: float
    tensors of one dtype, or a float tensor and a Python number (the bulk of a custom
    backward's and an optimizer's arithmetic). The same ufunc call as ``apply_op`` and the same
    result, without its generality; None means "use apply_op"."""
    if _forward_ad is not None:
        return None
    t: TensorBase
    if _is_tensor(a):
        t = cython.cast(TensorBase, a)
        first = t._data
        if (t._requires_grad or _stored_node(t) is not None
                or (t._base is not None and _base_requires_grad(t._base))):
            if is_grad_enabled():
                return None
    else:
        first = None
    if _is_tensor(b):
        t = cython.cast(TensorBase, b)
        second = t._data
        if (t._requires_grad or _stored_node(t) is not None
                or (t._base is not None and _base_requires_grad(t._base))):
            if is_grad_enabled():
                return None
    else:
        second = None
    if first is not None:
        dtype = _dtype_of(first)
        if dtype is not _F32 and dtype is not _F64:
            return None
        if second is None:
            kind = type(b)
            if kind is not float and kind is not int:
                return None
            second = _scalar_array(b, dtype)
        elif _dtype_of(second) is not dtype:
            return None
    elif second is not None:
        dtype = _dtype_of(second)
        kind = type(a)
        if (dtype is not _F32 and dtype is not _F64) or (kind is not float and kind is not int):
            return None
        first = _scalar_array(a, dtype)
    else:
        return None
    if cython.compiled and (gradviz_cache_wanted(first) or gradviz_cache_wanted(second)):
        previous = gradviz_cache_enter()  # Note [Array cache]
        try:
            result = _quiet_kernel(op.kernel, [first, second], attrs)
        finally:
            gradviz_cache_exit(previous)
    else:
        result = _quiet_kernel(op.kernel, [first, second], attrs)
    return None if result is None else _wrap(result)


def tensor_add(self, other):
    if _plain_operand(self) and _plain_operand(other):
        result = _unrecorded_binary(_op_add, self, other, _ALPHA_ONE)
        if result is not None:
            return result
        return apply_op(_op_add, (self, other), _ALPHA_ONE)
    return _arith["add_py"](self, other)


def tensor_radd(self, other):
    if _plain_operand(self) and _plain_operand(other):
        result = _unrecorded_binary(_op_add, self, other, _ALPHA_ONE)
        if result is not None:
            return result
        return apply_op(_op_add, (self, other), _ALPHA_ONE)  # PyTorch orders it self, other
    return _arith["add_py"](self, other)


def tensor_sub(self, other):
    if _plain_operand(self) and _plain_operand(other):
        result = _unrecorded_binary(_op_sub, self, other, _ALPHA_ONE)
        if result is not None:
            return result
        return apply_op(_op_sub, (self, other), _ALPHA_ONE)
    return _arith["sub_py"](self, other)


def tensor_mul(self, other):
    if _plain_operand(self) and _plain_operand(other):
        result = _unrecorded_binary(_op_mul, self, other, _NO_ATTRS)
        if result is not None:
            return result
        return apply_op(_op_mul, (self, other), _NO_ATTRS)
    return _arith["mul_py"](self, other)


def tensor_rmul(self, other):
    if _plain_operand(self) and _plain_operand(other):
        result = _unrecorded_binary(_op_mul, self, other, _NO_ATTRS)
        if result is not None:
            return result
        return apply_op(_op_mul, (self, other), _NO_ATTRS)
    return _arith["mul_py"](self, other)


def tensor_truediv(self, other):
    if _plain_operand(self) and _plain_operand(other):
        result = _unrecorded_binary(_op_div, self, other, _NO_ATTRS)
        if result is not None:
            return result
        return apply_op(_op_div, (self, other), _NO_ATTRS)
    return _arith["div_py"](self, other)


def tensor_neg(self):
    if _plain_operand(self):
        return apply_op(_op_neg, (self,), _NO_ATTRS)
    return _arith["neg_py"](self)
