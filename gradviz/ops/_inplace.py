"""In-place operations (``add_``, ``x += y``, ``x[i] = v``, ``zero_``, ...).

Note [In-place semantics]
-------------------------
An in-place op computes the out-of-place op on a snapshot of the old value, writes the result
into the tensor's storage and bumps its version counter (shared with every view of that
storage), so tensors saved for backward before the write are caught by the version check.

* On a leaf that requires grad, or a view of one, with grad mode on: PyTorch's error.
* On an output of a multi-output view op (``split``, ``chunk``, ``unbind``) or a view of one,
  when the write would be recorded: PyTorch's error (Note [Multi-output views] in
  ``ops/_shape.py``).
* On a tensor that is not a view: its history is rebased, ``grad_fn`` becomes the op's node.
* On a view whose base is part of a graph (or when the written value requires grad): the
  write is differentiated like PyTorch's ``CopySlices``: the base gets a ``CopySlices`` node
  (gradient zero inside the written region, passed through elsewhere; the region's gradient
  goes to the op).
* After any write, the live views of the base (the written view included) get a new
  ``grad_fn``, an ``AsStridedBackward0`` over the base's new history (Note [Views after their
  base changed] in ``gradviz_ext/_engine.py``).

``x[key] = value`` with a basic key (ints, slices, None, Ellipsis) writes through the view
``x[key]`` (``copy_`` or ``fill_``), so a non-leaf records ``CopySlices`` as in PyTorch; a key
that selects all of ``x`` writes to ``x`` itself; an advanced key (tensors, lists, bools)
records ``IndexPutBackward0``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gradviz_ext import engine as _engine
from gradviz_ext import ops as _ext_ops

from .. import dtypes as _dtypes
from .._tensor import Tensor, _update_retains_grad, _wrap
from ..storage import in_shared_memory, shared_copy
from ._pointwise import checked_integer, legacy_alpha
from ._registry import Op, apply, declare, exports, saves_inputs
from ._saved import Attr, Computed, Input, tensor_attr
from ._scatter_add import add_at
from ._shape import (
    check_advanced_key,
    check_basic_key,
    check_slice_steps,
    expand_target,
    getitem,
    in_range_ints,
    scalar_tensor_keys,
    sequence_as_tuple,
)

_LEAF_MESSAGE = "a leaf Variable that requires grad is being used in an in-place operation."
_VIEW_OF_LEAF_MESSAGE = "a view of a leaf Variable that requires grad is being used in an in-place operation."


_requires_grad = _ext_ops.requires_grad
_grad_fn = _engine.stored_grad_fn  # Tensor.grad_fn raises for a view whose base changed


_MULTI_OUTPUT_MESSAGE = (
    " This view is the output of a function that returns multiple views. Such functions do not "
    "allow the output views to be modified inplace. You should replace the inplace operation "
    "by an out-of-place one."
)


_CUSTOM_FUNCTION_MESSAGE = (
    " This view was created inside a custom Function (or because an input was returned as-is) "
    "and the autograd logic to handle view+inplace would override the custom backward "
    "associated with the custom Function, leading to incorrect gradients. This behavior is "
    "forbidden. You can fix this by cloning the output of the custom Function."
)


_NO_GRAD_VIEW_MESSAGE = (
    " Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify "
    "your code by moving both the view and the inplace either both inside the {block} block (if "
    "you don't want the inplace to be tracked) or both outside (if you want the inplace to be "
    "tracked)."
)


def _check_writable(self, others=()):
    if not _engine.is_grad_enabled():
        return
    base = self._base
    if base is not None and self._view_kind != _engine.VIEW_DEFAULT and (
            _requires_grad(self) or _requires_grad(base) or any(_requires_grad(o) for o in others)):
        raise RuntimeError(_view_error(self, "is being modified inplace"))
    if _grad_fn(self) is None and self._requires_grad:
        raise RuntimeError(_LEAF_MESSAGE)
    if base is not None and base.grad_fn is None and base._requires_grad:
        raise RuntimeError(_VIEW_OF_LEAF_MESSAGE)


_PARTIAL_OVERLAP_MESSAGE = (
    "unsupported operation: some elements of the input tensor and the written-to tensor refer "
    "to a single memory location. Please clone() the tensor before performing the operation.")


def _span(array):
    """``(first byte, end)`` of a dense array (C- or F-contiguous, so its strides are not
    negative), else None: PyTorch only compares the memory of dense tensors."""
    if not (array.flags.c_contiguous or array.flags.f_contiguous):
        return None
    start = array.__array_interface__["data"][0]
    return start, start + array.nbytes


def _layout(array):
    """Sizes and strides without the dimensions of size 1 (whose strides mean nothing)."""
    return [(n, s) for n, s in zip(array.shape, array.strides) if n != 1]


def _check_no_partial_overlap(self, others):
    """PyTorch's refusal of an in-place op one of whose operands shares some, but not all, of
    the written-to memory (``t[1:].add_(t[:-1])``): the result would depend on the order
    elements are written in. Like PyTorch, it compares dense tensors only, and the same
    elements in another layout (``m.add_(m.t())``) also count as partial."""
    target = self._data
    for other in others:
        if not isinstance(other, Tensor) or other._data is target:
            continue
        data = other._data
        if not np.may_share_memory(target, data):
            continue
        mine, theirs = _span(target), _span(data)
        if mine is None or theirs is None:
            continue  # PyTorch's "too hard to tell": the op runs
        if mine == theirs and _layout(target) == _layout(data):
            continue  # the same elements in the same order: fine (``t.add_(t)``)
        if mine[0] < theirs[1] and theirs[0] < mine[1]:
            raise RuntimeError(_PARTIAL_OVERLAP_MESSAGE)


def _view_error(view, what):
    """PyTorch's error for a view made by a multi-output op (``split``, ``chunk``, ``unbind``),
    with grad mode off or by a custom Function, when it ``what`` ("is being modified inplace",
    or "its base or another view of its base has been modified inplace") and autograd would
    have to record it (Note [Multi-output views] in ``ops/_shape.py``, Note [Views after their base changed]
    in ``gradviz_ext/_engine.py``)."""
    node = _grad_fn(view)
    name, nr = None, view._output_nr
    if isinstance(node, _ChangedViewError):
        name, nr = node.view_node_name, node.view_output_nr
    elif node is not None:
        name = _engine.short_node_name(node.name())  # PyTorch says "Output 0 of Split"
    multi_output = view._view_kind == _engine.VIEW_MULTI_OUTPUT
    inference = view._view_kind == _engine.VIEW_INFERENCE_MODE
    custom = view._view_kind == _engine.VIEW_CUSTOM_FUNCTION
    if name is not None and (multi_output or custom):
        header = f"Output {nr} of {name} is a view and {what}."
    else:
        # without a node PyTorch words it as made under no_grad (a piece of a constant too); a
        # view made with grad mode on of a no_grad view has a node, and PyTorch names it
        made = ("A view was created in" if name is None
                else f"Output {nr} of {name} is a view of a view which was created in")
        if inference:
            header = f"{made} inference mode and {what} in normal mode."
        else:
            header = f"{made} no_grad mode and {what} with grad mode enabled."
    if multi_output:
        return header + _MULTI_OUTPUT_MESSAGE
    if custom:
        return header + _CUSTOM_FUNCTION_MESSAGE
    block = "inference_mode" if inference else "no_grad"
    return header + _NO_GRAD_VIEW_MESSAGE.format(block=block)


def _check_castable(result_dtype, target):
    if result_dtype._category > target._category:
        raise RuntimeError(
            f"result type {_TYPE_WORDS.get(result_dtype.name)} can't be cast to the desired output type "
            f"{_TYPE_WORDS.get(target.name, target.name.capitalize())}"
        )


_TYPE_WORDS = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
               "bool": "Bool", "float32": "Float", "float64": "Double", "float16": "Half"}


def _snapshot(tensor):
    """A tensor with ``tensor``'s autograd identity and a copy of its current value."""
    out = _wrap(tensor._data.copy())
    out.grad_fn = _grad_fn(tensor)
    out._output_nr = tensor._output_nr
    out._requires_grad = tensor._requires_grad
    if _grad_fn(tensor) is None and tensor._requires_grad:
        out._grad_accumulator = tensor._grad_accumulator
    return out


def _check_result_shape(self, result):
    """An in-place op cannot grow its tensor: PyTorch's error for ``x.add_(y)`` with a ``y``
    that broadcasts ``x`` to a larger shape."""
    if result._data.shape != self._data.shape:
        raise RuntimeError(
            f"output with shape {list(self._data.shape)} doesn't match the broadcast shape "
            f"{list(result._data.shape)}")


def _write(self, result):
    """Copy ``result``'s values into ``self``'s storage and bump the version."""
    _check_result_shape(self, result)
    if not self._data.flags.writeable:
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a "
            "single memory location. Please clone() the tensor before performing the operation."
        )
    np.copyto(self._data, result._data, casting="unsafe")
    self._version_counter.bump()


def _rebase(self, result):
    """Make ``self`` the output of ``result``'s node (its history now ends in that node)."""
    node = result.grad_fn
    self.grad_fn = node
    self._output_nr = result._output_nr
    if self._retains_grad:
        _update_retains_grad(self)
    saved = getattr(node, "_saved_output", None)
    if saved is not None:
        # the node saved its output: that output is now `self`, at its new version
        node._saved_output = _engine.SavedTensor(self, True)


def inplace(self, fn, *others):
    """Apply ``fn(old_value) -> new_value`` to ``self`` in place (Note [In-place semantics]).

    ``others`` are the other tensor operands, only used to decide whether a graph is needed.
    """
    if _ext_ops._forward_ad is not None:  # a dual level is active: the tangent changes too
        return forward_ad_inplace(self, fn, others, _inplace)
    return _inplace(self, fn, *others)


# Forward AD's in-place rule ``(self, fn, others, run)``. Forward AD lives in the autograd
# layer, above this one, and installs its rule here when it loads; a dual level (the only way
# the branch above runs) cannot be entered before it has.
forward_ad_inplace: Callable[..., Any] | None = None


def _inplace(self, fn, *others):
    if not isinstance(self, Tensor):
        raise TypeError(f"in-place operation on {type(self).__name__}")
    _check_writable(self, others)
    _check_no_partial_overlap(self, others)
    needs_graph = _engine.is_grad_enabled() and (
        _requires_grad(self) or any(_requires_grad(o) for o in others)
        or (self._base is not None and _requires_grad(self._base)))
    if not needs_graph:
        previous = _engine.set_grad_enabled_flag(False)
        try:
            result = fn(_wrap(self._data))
        finally:
            _engine.set_grad_enabled_flag(previous)
        _check_castable(result.dtype, self.dtype)
        _write(self, result)
        root = self if self._base is None else self._base
        if root._views is not None:
            refresh_views(root)
        return self
    if self._base is not None:
        return _inplace_on_view(self, fn)
    result = fn(_snapshot(self))
    _check_castable(result.dtype, self.dtype)
    if result.dtype is not self.dtype:
        result = result.to(self.dtype)
    _write(self, result)
    if result.grad_fn is not None:
        _rebase(self, result)
    if self._views is not None:
        refresh_views(self)
    return self


def share_memory_(self):
    """``x.share_memory_()``: move the memory into anonymous shared memory, which processes
    forked afterwards share (nothing to do when it is there already); returns ``self``. The
    views of the tensor that take part in autograd move with it. A view cannot be moved (a
    numpy view cannot change its buffer): share its base."""
    if in_shared_memory(self._data):
        return self
    if self._base is not None:
        raise RuntimeError("share_memory_() of a view: gradviz moves the memory of a tensor that "
                           "is not a view; call share_memory_() on its base (x._base)")
    self._data = shared_copy(self._data)
    for view in _engine.live_views(self):
        view._data = _replay_numpy(self._data, view._view_chain)
    return self


# ---- CopySlices: writing through a view ---------------------------------------------------

def _replay(tensor, chain):
    """Re-derive a view from its base by replaying the view ops (differentiably)."""
    for op, attrs in chain:
        tensor = apply(op, tensor, **attrs)
    return tensor


def _replay_numpy(array, chain):
    for op, attrs in chain:
        array = op.forward(array, **attrs)
    return array


def _copy_slices_forward(base, value, chain):
    out = base.copy()
    region = _replay_numpy(out, chain)
    if not region.flags.writeable:
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a "
            "single memory location. Please clone() the tensor before performing the operation."
        )
    np.copyto(region, value, casting="unsafe")
    return out


def _copy_slices_backward(ctx, g):
    from ._creation import zeros

    if not g.is_contiguous():
        # torch copies the gradient into the base's layout first (new_empty_strided): the view
        # chain (a ``view(-1)``) replays on it as it did on the base
        g = g.contiguous()
    region = _replay(g, ctx.chain)
    grad_base = None
    if ctx.needs_input_grad[0]:
        grad_base = apply(COPY_SLICES, g, zeros(region._data.shape, dtype=g.dtype), chain=ctx.chain)
    grad_value = region if ctx.needs_input_grad[1] else None
    return grad_base, grad_value


COPY_SLICES = Op("copy_slices", "CopySlices", forward=_copy_slices_forward,
                 backward=_copy_slices_backward, dtype=lambda base, value, **_: base.dtype)


def _inplace_on_view(self, fn):
    base = self._base
    chain = self._view_chain
    _check_rederivable(self, base, chain)
    base_before = _snapshot(base)
    new_value = fn(_replay(base_before, chain))
    _check_castable(new_value.dtype, self.dtype)
    _check_result_shape(self, new_value)
    new_base = apply(COPY_SLICES, base_before, new_value, chain=chain)
    _write(base, new_base)
    base.grad_fn = new_base.grad_fn
    base._output_nr = 0
    if base._retains_grad:
        _update_retains_grad(base)
    refresh_views(base, self)
    return self


def _check_rederivable(view, base, chain):
    """Refuse a write through a view that its chain no longer re-derives from its base: one made
    while neither had a history, before the base changed shape in place (``t_()``, ``squeeze_()``:
    Note [In-place view ops] in ``ops/_inplace_views.py``)."""
    region = _replay_numpy(base._data, chain)
    data = view._data
    if region.shape != data.shape or (data.size and region.__array_interface__["data"][0]
                                      != data.__array_interface__["data"][0]):
        raise RuntimeError(
            "this view was taken before its base changed shape in place (t_(), transpose_(), "
            "squeeze_(), unsqueeze_(), as_strided_()) when neither had an autograd history, and "
            "gradviz can no longer re-derive it from the base: take the view again after the "
            "shape change")


# ---- views whose base changed: Note [Views after their base changed] (gradviz_ext/_engine.py)

def _as_strided_forward(base, chain, shape):
    return _replay_numpy(base, chain)


def _as_strided_backward(ctx, g):
    return (apply(AS_STRIDED_SCATTER, g, chain=ctx.chain, shape=ctx.shape),)


def _as_strided_scatter_forward(grad, chain, shape):
    """The gradient of a base of ``shape`` from the gradient of its view ``chain``: each
    element of the view adds its gradient to the base element it reads (several, for a view
    such as ``expand`` that reads one element more than once)."""
    size = int(np.prod(shape, dtype=np.int64))
    positions = _replay_numpy(np.arange(size).reshape(shape), chain)
    out = np.zeros(size, dtype=grad.dtype)
    np.add.at(out, np.asarray(positions).ravel(), np.broadcast_to(grad, np.shape(positions)).ravel())
    return out.reshape(shape)


def _as_strided_scatter_backward(ctx, g):
    return (apply(AS_STRIDED, g, chain=ctx.chain, shape=ctx.shape),)


# A view re-derived from its base's current value in one step, as PyTorch's regenerated
# ``grad_fn``; ``chain`` is the view's steps from its base, ``shape`` the base's shape.
AS_STRIDED = Op("as_strided_view", "AsStridedBackward0", forward=_as_strided_forward,
                backward=_as_strided_backward)
AS_STRIDED_SCATTER = Op("as_strided_view_scatter", "AsStridedScatterBackward0",
                        forward=_as_strided_scatter_forward, backward=_as_strided_scatter_backward)


_ChangedViewError = _engine.ChangedViewError


def refresh_views(root, written=None):
    """Give the live views of ``root`` (and ``written``, a view of it just written through)
    a ``grad_fn`` over ``root``'s current history, after ``root`` or a view of it was modified
    in place (Note [Views after their base changed] in ``gradviz_ext/_engine.py``)."""
    views = _engine.live_views(root)
    if written is not None and not any(view is written for view in views):
        views.append(written)
    root_needs_grad = _requires_grad(root)
    # PyTorch renews the view under grad mode (outside inference mode, which records nothing)
    previous_inference = _engine.set_inference_mode_flag(False)
    previous = _engine.set_grad_enabled_flag(True)
    try:
        for view in views:
            if _grad_fn(view) is None and not root_needs_grad:
                continue
            if view._view_kind != _engine.VIEW_DEFAULT:
                if not isinstance(_grad_fn(view), _ChangedViewError):
                    message = _view_error(
                        view, "its base or another view of its base has been modified inplace")
                    view.grad_fn = _ChangedViewError(view, message)
                    view._output_nr = 0
                continue
            fresh = apply(AS_STRIDED, root, chain=view._view_chain, shape=root._data.shape)
            view.grad_fn = fresh.grad_fn
            view._output_nr = 0
            if view._retains_grad:
                _update_retains_grad(view)
    finally:
        _engine.set_grad_enabled_flag(previous)
        _engine.set_inference_mode_flag(previous_inference)


# ---- ops that exist for in-place use ------------------------------------------------------

def _overwritten(g):
    """The gradient for values an in-place op overwrote: PyTorch's ``zeros_like(grad)``, a
    constant (so a NaN or inf upstream does not leak through as ``g * 0`` would, and under
    create_graph it does not require grad)."""
    from ._creation import zeros_like

    return zeros_like(g)


FILL = Op("fill", "FillBackward2",
          forward=lambda a, value: np.full_like(a, value),
          backward=lambda ctx, g: (_overwritten(g),))

# fill_ with a 0-d tensor (PyTorch's overload 3; also what ``x[:] = number`` records, as
# PyTorch makes the number a tensor): the value's gradient is the sum of the gradient
FILL_TENSOR = Op("fill_tensor", "FillBackward3",
                 forward=lambda a, value: np.full_like(a, value),
                 backward=lambda ctx, g: (_overwritten(g) if ctx.needs_input_grad[0] else None,
                                          g.sum() if ctx.needs_input_grad[1] else None))

ZERO = Op("zero", "ZeroBackward0",
          forward=lambda a: np.zeros_like(a),
          backward=lambda ctx, g: (_overwritten(g),))

COPY = Op("copy", "CopyBackwards",
          forward=lambda a, src: np.broadcast_to(src, a.shape).astype(a.dtype, copy=True),
          backward=lambda ctx, g: (_overwritten(g) if ctx.needs_input_grad[0] else None,
                                   g if ctx.needs_input_grad[1] else None))


def _index_put_forward(a, value, key, **_):
    out = a.copy()
    out[key] = value
    return out


def _index_put_backward(ctx, g):
    from ._shape import getitem

    key = ctx.key_for_getitem
    grad_self = None
    if ctx.needs_input_grad[0]:
        grad_self = apply(INDEX_PUT, g, 0.0, key=ctx.key, key_for_getitem=key)
    grad_value = getitem(g, key) if len(ctx.needs_input_grad) > 1 and ctx.needs_input_grad[1] else None
    return (grad_self, grad_value) if len(ctx.needs_input_grad) > 1 else (grad_self,)


INDEX_PUT = Op("index_put", "IndexPutBackward0", forward=_index_put_forward,
               backward=_index_put_backward, dtype=lambda a, value, **_: a.dtype)


def _numpy_key(key):
    from ._shape import _as_index

    items = key if isinstance(key, tuple) else (key,)
    converted = tuple(_as_index(item) for item in items)
    return converted if isinstance(key, tuple) else converted[0]


# ---- index_put and put (the functional forms of indexed writes) ---------------------------------

def _index_put_accumulate_forward(a, value, key, **_):
    out = a.copy()  # C order: add_at adds through its flat positions
    add_at(out, key, np.broadcast_to(value, out[key].shape))
    return out


def _index_put_accumulate_backward(ctx, g):
    from ._shape import getitem

    grad_value = getitem(g, ctx.key_for_getitem) if ctx.needs_input_grad[1] else None
    return (g if ctx.needs_input_grad[0] else None, grad_value)


INDEX_PUT_ACCUMULATE = Op("index_put_accumulate", "IndexPutBackward0",
                          forward=_index_put_accumulate_forward,
                          backward=_index_put_accumulate_backward,
                          dtype=lambda a, value, **_: a.dtype)


@declare(method=True, inplace=True)
def index_put(input, indices, values, accumulate=False):
    """``input`` with ``values`` written at ``input[indices]`` (``indices`` a tuple of index
    tensors), or added there with ``accumulate=True`` (repeated positions add up)."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put(): argument 'indices' must be tuple of Tensors, not "
                        f"{type(indices).__name__}")
    key = tuple(indices)
    np_key = _numpy_key(key)
    if values.dtype is not input.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{input.dtype.name.capitalize()} for the destination and "
                           f"{values.dtype.name.capitalize()} for the source.")
    op = INDEX_PUT_ACCUMULATE if accumulate else INDEX_PUT
    return apply(op, input, values, key=np_key, key_for_getitem=key)


def _put_forward(a, source, index, accumulate, **_):
    out = a.copy()
    flat = out.reshape(-1)
    if accumulate:
        np.add.at(flat, index, source.reshape(-1))
    else:
        flat[index] = source.reshape(-1)
    return out


def _put_backward(ctx, g):
    from ._rearrange import take

    index = _wrap(ctx.index)
    grad_self = None
    if ctx.needs_input_grad[0]:
        grad_self = g if ctx.accumulate else put(g, index, g.new_zeros(index.shape))
    grad_source = None
    if ctx.needs_input_grad[1]:
        grad_source = take(g, index).reshape(ctx.source_shape)
    return grad_self, grad_source


PUT = Op("put", "PutBackward0", forward=_put_forward, backward=_put_backward,
         dtype=lambda a, source, **_: a.dtype, saves=saves_inputs(1),
         saved={"accumulate": Attr("accumulate"), "index": Computed(tensor_attr("index_tensor")),
                "source": Input(1)})


@declare(method=True, inplace=True)
def put(input, index, source, accumulate=False):
    """``input`` with ``source``'s entries written at the flat positions ``index`` (added with
    ``accumulate=True``)."""
    if index.numel() != source.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of "
                           f"elements, but got source.numel() = {source.numel()}, "
                           f"index.numel() = {index.numel()}")
    if index.dtype is not _dtypes.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {_TYPE_WORDS[index.dtype.name]}")
    size = input.numel()
    positions = index._data.reshape(-1).astype(np.int64)
    bad = positions[(positions >= size) | (positions < -size)]
    if bad.size:
        raise IndexError(f"out of range: tried to access index {int(bad[0])} on a tensor of "
                         f"{size} elements.")
    positions = np.where(positions < 0, positions + size, positions)
    return apply(PUT, input, source, index=positions, accumulate=bool(accumulate),
                 source_shape=tuple(source.shape), index_tensor=index)


@declare(name=False, method="__setitem__")
def _setitem_method(self, key, value):
    """``t[key] = value``; returns None, as torch's ``Tensor.__setitem__``."""
    setitem(self, key, value)


def setitem(self, key, value):
    """``self[key] = value`` (``value`` a tensor or a number, broadcast to the region).

    A basic key writes through the view ``self[key]`` (``copy_``/``fill_``, so a non-leaf
    records ``CopySlices``; a key that selects all of ``self`` writes to ``self``); an advanced
    key records ``IndexPutBackward0`` (Note [In-place semantics])."""
    if value is None or isinstance(value, (str, bytes, dict, set)):
        # what numpy would turn into a nan, an object or a parse error
        raise TypeError(f"can't assign a {type(value).__name__} to a torch.{_TYPE_WORDS[self.dtype.name]}Tensor: "
                        "the value must be a tensor or a number")
    if _copy_element_directly(self, key, value):
        return self
    if _engine.is_grad_enabled() and _grad_fn(self) is None and self._requires_grad:
        raise RuntimeError(_VIEW_OF_LEAF_MESSAGE)  # PyTorch writes through a view of self
    key = scalar_tensor_keys(sequence_as_tuple(key))
    if key is False:  # PyTorch writes nothing, and records nothing
        return self
    if key is True or (isinstance(key, Tensor) and key.ndim == 0 and key.dtype is _dtypes.bool
                       and bool(key._data)):
        # PyTorch writes through the view self.unsqueeze(0), which records CopySlices
        from ._shape import unsqueeze

        view = unsqueeze(self, 0)
        if isinstance(value, Tensor):
            copy_(view, value)
        else:
            fill_(view, value)
        return self
    items = key if isinstance(key, tuple) else (key,)
    check_slice_steps(items)
    np_key = _numpy_key(key)
    advanced = not all(_is_basic(item) for item in items)
    if advanced:
        check_advanced_key(self._data.shape, items)
    else:
        check_basic_key(self._data.shape, items)
    number = type(value) in (int, float, bool)
    fills = number or (isinstance(value, Tensor) and value.ndim == 0)  # PyTorch: fill_ a 0-d tensor
    if isinstance(value, Tensor):
        region_shape = self._data[np_key].shape
        if advanced:
            if not _broadcastable(value._data.shape, region_shape):
                raise RuntimeError(
                    f"shape mismatch: value tensor of shape {list(value._data.shape)} cannot be "
                    f"broadcast to indexing result of shape {list(region_shape)}"
                )
        else:
            # a basic key writes through a view: PyTorch drops the value's leading 1s, then
            # expands it to the region (with expand's errors)
            shape = value._data.shape
            while shape and shape[0] == 1:
                shape = shape[1:]
            if shape != value._data.shape:
                value = value.reshape(shape)
            expand_target(value, region_shape)
    if not advanced and (isinstance(value, Tensor) or number):
        if _selects_all(items, self._data.shape):
            target = self
            if fills:
                return inplace(self, lambda old: apply(FILL_TENSOR, old, value), value)
        else:
            target = getitem(self, key)
        if isinstance(value, Tensor):
            copy_(target, value)
        else:
            fill_(target, value)
        return self
    view_key, rest = _split_key(items)
    if view_key is not None and not _selects_all(view_key, self._data.shape):
        # ints, None or partial slices beside tensor indices: PyTorch indexes the view they
        # select, which records CopySlices on self
        setitem(getitem(self, view_key), rest, value)
        return self
    return inplace(self, lambda old: apply(INDEX_PUT, old, value, key=np_key, key_for_getitem=key), value)


# Note [Direct element writes]
# ``N[i, j] += 1`` is makemore's counting loop (228,146 times in its first lecture): Python
# reads ``N[i, j]``, adds in place, and writes the result back with ``N[i, j] = result``. The
# general path of that write selects the element again and copies through ``copy_`` with all
# of ``inplace``'s checks: 25 of the loop's 48 us. When ``key`` is ints in range and ``value``
# a tensor of ``self``'s dtype and of the element's (or sub-tensor's) shape, with no graph to
# record (nothing requires grad, no forward AD, not an inference tensor), the write is one
# ``np.copyto`` into the selected region and one version bump, as ``copy_`` through the view
# makes; a value that partly overlaps the region, which PyTorch refuses, takes the general path.
def _copy_element_directly(self, key, value):
    """Try Note [Direct element writes]; False means "take the general path"."""
    if type(key) is int:
        key = (key,)
    elif type(key) is not tuple:
        return False
    data = self._data
    if (not isinstance(value, Tensor) or not in_range_ints(key, data.shape)
            or value._data.dtype != data.dtype or _ext_ops._forward_ad is not None
            or self._version_counter.inference):
        return False
    if _engine.is_grad_enabled() and (
            _requires_grad(self) or _requires_grad(value)
            or (self._base is not None and _requires_grad(self._base))):
        return False
    region = data[key + (Ellipsis,)]  # a view, also of one element
    source = value._data
    if source.shape != region.shape or not region.flags.writeable:
        return False
    if np.may_share_memory(region, source) and (
            region.strides != source.strides
            or _ext_ops.array_address(region) != _ext_ops.array_address(source)):
        return False  # overlapping elsewhere: the general path's check and error
    np.copyto(region, source)
    self._version_counter.bump()
    root = self if self._base is None else self._base
    if root._views is not None:
        refresh_views(root)
    return True


def _is_basic(item):
    """An index that selects a view: an integer, a slice, None or Ellipsis."""
    if item is None or item is Ellipsis or isinstance(item, slice):
        return True
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


def _split_key(items):
    """A key with tensor indices as (the basic key of the view PyTorch indexes first, the key
    left for that view), or (None, None) for keys this does not cover (bools)."""
    view_key, rest = [], []
    for item in items:
        if isinstance(item, (bool, np.bool_)):
            return None, None
        if not _is_basic(item):
            # a mask spans as many dims as it has (none for a 0-d one), an index tensor one
            view_key.extend([slice(None)] * _dims_spanned(item))
            rest.append(item)
        elif item is Ellipsis:
            view_key.append(item)
            rest.append(item)
        elif item is None or isinstance(item, slice):
            view_key.append(item)
            rest.append(slice(None))
        else:  # an integer: that dim is gone from the view
            view_key.append(item)
    return tuple(view_key), tuple(rest)


def _dims_spanned(item):
    """How many of the indexed tensor's dims an advanced index covers."""
    data = item._data if isinstance(item, Tensor) else item
    if isinstance(data, np.ndarray) and data.dtype in (np.bool_, np.uint8):
        return data.ndim
    return 1


def _selects_all(items, shape):
    """Whether the basic key ``items`` is ``self`` itself: full slices and Ellipsis only
    (PyTorch's indexing then writes to the tensor, not through a view)."""
    explicit = [item for item in items if item is not Ellipsis]
    if len(explicit) > len(shape):
        return False
    dims = 0
    for item in items:
        if item is Ellipsis:
            dims += len(shape) - len(explicit)
            continue
        if not isinstance(item, slice) or item.step not in (None, 1):
            return False
        start, stop, _ = item.indices(shape[dims])
        if start != 0 or stop != shape[dims]:
            return False
        dims += 1
    return True


def _broadcastable(shape, target):
    try:
        np.broadcast_shapes(shape, target)
    except ValueError:
        return False
    return np.broadcast_shapes(shape, target) == tuple(target)


@declare(name=False, method=True)
def copy_(self, src, non_blocking=False):
    if isinstance(src, (bool, int, float)):  # torch copies a number as a 0-d tensor
        src = _wrap(np.asarray(src))
    elif not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'other' (position 1) must be Tensor, not "
                        f"{type(src).__name__}")
    if not _broadcastable(src._data.shape, self._data.shape):
        raise RuntimeError(
            f"The size of tensor a ({self._data.shape[-1] if self.ndim else 1}) must match the size "
            f"of tensor b ({src._data.shape[-1] if src.ndim else 1}) at non-singleton dimension "
            f"{self.ndim - 1}")
    return inplace(self, lambda old: apply(COPY, old, src), src)


@declare(name=False, method=True)
def fill_(self, value):
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(
                "fill_ only supports 0-dimension value tensor but got tensor with "
                f"{value.ndim} dimensions.")
        return inplace(self, lambda old: apply(FILL_TENSOR, old, value), value)
    if type(value) in (int, float) and self._data.dtype.kind in "iu":
        value = checked_integer(value, self._data.dtype)
    return inplace(self, lambda old: apply(FILL, old, value=value))


@declare(name=False, method=True)
def zero_(self):
    return inplace(self, lambda old: apply(ZERO, old))


def inplace_method(fn):
    """``x.name_(...)``: the in-place form of the out-of-place ``fn(x, ...)``; ``ops/__init__.py``
    makes one for each name a function declares ``inplace=`` (Note [Declared once])."""
    ufunc = _DIRECT_UFUNCS.get(fn.__name__)
    cast_first = fn.__name__ in _CAST_CHECKED_FIRST

    def method(self, *args, **kwargs):
        if len(args) == 2 and fn.__name__ in ("add", "sub"):  # p.data.add_(-lr, p.grad.data)
            args, kwargs = legacy_alpha(fn.__name__ + "_", args, kwargs)
        if cast_first:
            other = args[0] if len(args) == 1 else kwargs.get("other")
            if isinstance(self, Tensor) and isinstance(other, (Tensor, bool, int, float)):
                _check_castable(_dtypes.result_type(self, other), self.dtype)
        if ufunc is not None and _write_directly(self, ufunc, args, kwargs):
            return self
        others = [a for a in args if isinstance(a, Tensor)] + [
            v for v in kwargs.values() if isinstance(v, Tensor)]
        return inplace(self, lambda old: fn(old, *args, **kwargs), *others)

    method.__name__ = fn.__name__ + "_"
    return method


# The in-place bitwise ops check that the promoted dtype fits ``self`` before they compute, as
# PyTorch does: ``x &= 1.5`` on an integer tensor is its RuntimeError ("result type Float can't
# be cast to the desired output type Long"), not the NotImplementedError of ``x & 1.5``, whose
# kernel has no float dtype. Other in-place ops compute first and check after (``inplace``):
# their kernels take every dtype, so the order does not show.
_CAST_CHECKED_FIRST = frozenset(
    ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift"))


# Note [Direct in-place arithmetic]: ``p.add_(g, alpha=-lr)`` in an optimizer step records
# nothing, yet the general path computes a new array and copies it back: one extra pass and
# one extra allocation per parameter. When no graph is needed and nothing can change the
# dtype or the shape (a float32 or float64 tensor, and a tensor of its dtype and shape or a
# Python number as operand), ``add_``, ``sub_``, ``mul_`` and ``div_`` write into ``self``
# with the ufunc's ``out=``: the same values, one pass. So do ``add_``, ``sub_`` and ``mul_``
# of an integer tensor with a tensor of its dtype and shape or a Python int of its range
# (makemore's counting loop, ``N[i, j] += 1``; they wrap around as torch's do). With an ``alpha`` and a tensor operand,
# ``add_``/``sub_`` are one fused multiply-add per element where the CPU has it (PyTorch's
# rounding, and no temporary for ``alpha * g``: Note [Whole-array kernels] in
# gradviz_ext/_ops.py). Anything else takes the general path, which owns the errors (and
# float16's rule, Note [Half precision arithmetic]).
_DIRECT_UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide}


def _fits(number, dtype):
    """Whether the Python int ``number`` is in the range of the integer ``dtype``."""
    bounds = _INT_BOUNDS.get(dtype)
    if bounds is None:
        info = np.iinfo(dtype)
        bounds = _INT_BOUNDS[dtype] = (int(info.min), int(info.max))
    return bounds[0] <= number <= bounds[1]


_INT_BOUNDS: dict = {}


def _write_directly(self, ufunc, args, kwargs):
    """Try Note [Direct in-place arithmetic]; False means "take the general path"."""
    if len(args) != 1 or not isinstance(self, Tensor) or _ext_ops._forward_ad is not None:
        return False
    alpha = kwargs.get("alpha", 1)
    if (len(kwargs) > 1 or (kwargs and "alpha" not in kwargs)
            or (alpha != 1 and ufunc not in (np.add, np.subtract))):
        return False
    data = self._data
    kind = data.dtype.kind
    if kind == "f":
        if data.dtype.itemsize < 4:
            return False  # float16 computes a Python number in float32 (Note [Half precision arithmetic])
    elif kind not in "iu" or ufunc is np.true_divide or alpha != 1:
        return False  # bool, and integer division (torch's error): the general path
    if not data.flags.writeable:
        return False
    other = args[0]
    if isinstance(other, Tensor):
        if other._data.dtype != data.dtype or other._data.shape != data.shape:
            return False
        operand = other._data
    elif (type(other) is float and kind == "f") or (
            type(other) is int and (kind == "f" or _fits(other, data.dtype))):
        operand = other
    else:
        return False
    if type(alpha) not in (float, int):
        return False
    if isinstance(other, Tensor):
        _check_no_partial_overlap(self, (other,))
    if _engine.is_grad_enabled() and (
            _requires_grad(self) or (isinstance(other, Tensor) and _requires_grad(other))
            or (self._base is not None and _requires_grad(self._base))):
        return False  # a graph is recorded: the general path
    if kind == "f":
        with np.errstate(all="ignore"):
            write_scaled(data, ufunc, operand, alpha)
    else:  # integer arrays wrap around without a warning: no error state to set
        write_scaled(data, ufunc, operand, alpha)
    self._version_counter.bump()
    root = self if self._base is None else self._base
    if root._views is not None:
        refresh_views(root)
    return True


def write_scaled(data, ufunc, operand, alpha=1):
    """``ufunc(data, alpha * operand)`` written into the array ``data``: the arithmetic of Note
    [Direct in-place arithmetic] (``ufunc`` one of ``_DIRECT_UFUNCS``' values, an ``alpha``
    other than 1 only with add and subtract), for the optimizers' steps on arrays too (Note
    [Optimizer steps on arrays] in ``optim/_optimizer.py``). Silencing numpy's warnings and
    bumping the version are the caller's."""
    if alpha != 1:
        if type(operand) is np.ndarray and _ext_ops.fused_add(
                data, operand, alpha if ufunc is np.add else -alpha, True) is not None:
            return
        operand = operand * alpha
    ufunc(data, operand, out=data, casting="unsafe")


def _fill_diagonal_method(masked_fill_):
    def fill_diagonal_(self, fill_value, wrap=False):
        """Write ``fill_value`` on the main diagonal (of a matrix, or of a tensor with all dims
        equal); ``wrap`` continues it below the first square of a tall matrix, as numpy."""
        if self.ndim < 2:
            raise RuntimeError("dimensions must larger than 1")
        if self.ndim > 2 and len(set(self.shape)) != 1:
            raise RuntimeError("all dimensions of input must be of equal length")
        mask = np.zeros(self._data.shape, dtype=bool)
        np.fill_diagonal(mask, True, wrap=wrap)
        return masked_fill_(self, _wrap(mask), fill_value)

    return fill_diagonal_


__all__ = exports(globals(), "inplace", "setitem", "copy_", "fill_", "zero_", "inplace_method")
