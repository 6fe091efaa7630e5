"""Shape ops and basic indexing. Most outputs are views: they share storage and the
version counter with their input, as in PyTorch."""

from __future__ import annotations

import builtins

import numpy as np

from .._tensor import Tensor, _wrap_dim
from ._registry import Op, apply

__all__ = ["reshape", "view", "transpose", "t", "permute", "unsqueeze", "squeeze", "squeeze_dim",
           "expand", "clone", "flatten", "getitem", "cat", "stack", "narrow", "select", "split",
           "chunk", "unbind", "flip", "contiguous", "unsafe_view"]


def _shape_arg(args):
    """Accept ``f(2, 3)`` and ``f((2, 3))``, like PyTorch."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    return tuple(int(a) for a in args)


def _infer_shape(shape, numel):
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise RuntimeError(f"invalid shape dimension {s}")
            known *= s
    if unknown:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _view_forward(a, shape, source):
    out = a.view()
    try:
        out.shape = shape
    except AttributeError:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
        ) from None
    return out


def _reshape_to_source_fast(ctx, g):
    return (np.reshape(g, ctx.attrs["source"]),)


VIEW = Op("view", "ViewBackward0", forward=_view_forward,
          backward=lambda ctx, g: (reshape(g, ctx.source),),
          fast_backward=_reshape_to_source_fast, view=True)
RESHAPE_ALIAS = Op("reshape_alias", "ReshapeAliasBackward0", forward=_view_forward,
                   backward=lambda ctx, g: (reshape(g, ctx.source),),
                   fast_backward=_reshape_to_source_fast, view=True)
UNSAFE_VIEW = Op("unsafe_view", "UnsafeViewBackward0",
                 forward=lambda a, shape, source: np.reshape(a, shape),
                 backward=lambda ctx, g: (reshape(g, ctx.source),),
                 fast_backward=_reshape_to_source_fast)


def unsafe_view(input, *shape):
    """A reshape recorded as ``UnsafeViewBackward0`` (the output is not tracked as a view)."""
    shape = _infer_shape(_shape_arg(shape), input._data.size)
    return apply(UNSAFE_VIEW, input, shape=shape, source=input._data.shape)


def view(input, *shape):
    shape = _infer_shape(_shape_arg(shape), input._data.size)
    return apply(VIEW, input, shape=shape, source=input._data.shape)


def reshape(input, *shape):
    """A view when the layout allows it, else a copy (like PyTorch)."""
    shape = _infer_shape(_shape_arg(shape), input._data.size)
    probe = input._data.view()
    try:
        probe.shape = shape
    except AttributeError:  # not expressible as a view: copy, as PyTorch's _reshape_copy
        return unsafe_view(clone(input), *shape)
    op = VIEW if input._data.flags.c_contiguous else RESHAPE_ALIAS  # PyTorch's two view paths
    return apply(op, input, shape=shape, source=input._data.shape)


def flatten(input, start_dim=0, end_dim=-1):
    if input.ndim == 0:
        return reshape(input, 1)
    start = _wrap_dim(start_dim, input.ndim)
    end = _wrap_dim(end_dim, input.ndim)
    shape = input._data.shape
    middle = 1
    for s in shape[start:end + 1]:
        middle *= s
    return reshape(input, shape[:start] + (middle,) + shape[end + 1:])


TRANSPOSE = Op("transpose", "TransposeBackward0",
               forward=lambda a, dim0, dim1: np.swapaxes(a, dim0, dim1),
               backward=lambda ctx, g: (transpose(g, ctx.dim0, ctx.dim1),),
               fast_backward=lambda ctx, g: (np.swapaxes(g, ctx.attrs["dim0"], ctx.attrs["dim1"]),),
               view=True)
T = Op("t", "TBackward0", forward=lambda a: a.T, backward=lambda ctx, g: (t(g),),
       fast_backward=lambda ctx, g: (g.T,), view=True)
PERMUTE = Op("permute", "PermuteBackward0",
             forward=lambda a, dims, inverse: np.transpose(a, dims),
             backward=lambda ctx, g: (permute(g, *ctx.inverse),),
             fast_backward=lambda ctx, g: (np.transpose(g, ctx.attrs["inverse"]),), view=True)


def transpose(input, dim0, dim1):
    ndim = input.ndim
    return apply(TRANSPOSE, input, dim0=_wrap_dim(dim0, ndim), dim1=_wrap_dim(dim1, ndim))


def t(input):
    """Transpose a tensor of at most 2 dimensions."""
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return apply(T, input)


def permute(input, *dims):
    dims = tuple(_wrap_dim(d, input.ndim) for d in _shape_arg(dims))
    if sorted(dims) != list(range(input.ndim)):
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
            f"length of the desired ordering of dimensions i.e. input.dim() = {input.ndim} is "
            f"not equal to len(dims) = {len(dims)}" if len(dims) != input.ndim
            else f"permute(): duplicate dims are not allowed, got {list(dims)}"
        )
    inverse = tuple(int(i) for i in np.argsort(dims))
    return apply(PERMUTE, input, dims=dims, inverse=inverse)


UNSQUEEZE = Op("unsqueeze", "UnsqueezeBackward0",
               forward=lambda a, dim: np.expand_dims(a, dim),
               backward=lambda ctx, g: (squeeze_dim(g, ctx.dim),),
               fast_backward=lambda ctx, g: (np.squeeze(g, ctx.attrs["dim"]),), view=True)
def _reshape_to_shape_fast(ctx, g):
    return (np.reshape(g, ctx.attrs["shape"]),)


def _squeeze_dim_op(name, node):
    return Op(name, node,
              forward=lambda a, dim, shape: np.squeeze(a, dim) if a.shape[dim] == 1 else a.view(),
              backward=lambda ctx, g: (reshape(g, ctx.shape),),
              fast_backward=_reshape_to_shape_fast, view=True)


SQUEEZE_DIM = _squeeze_dim_op("squeeze_dim", "SqueezeBackward1")
# the in-place squeeze_(dim) PyTorch's matmul uses for a vector times a matrix
SQUEEZE_DIM_INPLACE = _squeeze_dim_op("squeeze_dim_", "SqueezeBackward4")
SQUEEZE = Op("squeeze", "SqueezeBackward0",
             forward=lambda a, shape: np.squeeze(a),
             backward=lambda ctx, g: (reshape(g, ctx.shape),),
             fast_backward=_reshape_to_shape_fast, view=True)


def unsqueeze(input, dim):
    return apply(UNSQUEEZE, input, dim=_wrap_dim(dim, input.ndim + 1))


def squeeze_dim(input, dim, node="SqueezeBackward1"):
    op = SQUEEZE_DIM if node == "SqueezeBackward1" else SQUEEZE_DIM_INPLACE
    return apply(op, input, dim=_wrap_dim(dim, input.ndim), shape=input._data.shape)


def squeeze(input, dim=None):
    if dim is not None:
        return squeeze_dim(input, dim)
    return apply(SQUEEZE, input, shape=input._data.shape)


def _expand_backward(ctx, g):
    from ._reduction import sum_to

    return (sum_to(g, ctx.source),)


def _expand_fast(ctx, g):
    from ._reduction import sum_to_array

    return (sum_to_array(g, ctx.attrs["source"]),)


EXPAND = Op("expand", "ExpandBackward0",
            forward=lambda a, shape, source: np.broadcast_to(a, shape),
            backward=_expand_backward, fast_backward=_expand_fast, view=True)


def expand(input, *sizes):
    """Broadcast to ``sizes`` without copying (``-1`` keeps a dimension)."""
    sizes = _shape_arg(sizes)
    source = input._data.shape
    if len(sizes) < len(source):
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({len(source)})"
        )
    lead = len(sizes) - len(source)
    target = list(sizes)
    for i, size in enumerate(source):
        if target[lead + i] == -1:
            target[lead + i] = size
        elif size != 1 and size != target[lead + i]:
            raise RuntimeError(
                f"The expanded size of the tensor ({target[lead + i]}) must match the existing "
                f"size ({size}) at non-singleton dimension {lead + i}.  Target sizes: "
                f"{list(sizes)}.  Tensor sizes: {list(source)}"
            )
    return apply(EXPAND, input, shape=tuple(target), source=source)  # recorded even when a no-op, as in torch


CLONE = Op("clone", "CloneBackward0", forward=lambda a: a.copy(), backward=lambda ctx, g: (g,),
           fast_backward=lambda ctx, g: (g,))


def clone(input):
    return apply(CLONE, input)


def contiguous(input):
    """``input`` if its memory is row-major contiguous, else a contiguous copy (``CloneBackward0``)."""
    if input._data.flags.c_contiguous:
        return input
    return apply(CLONE, input)


# ---- indexing ---------------------------------------------------------------------------

def _scatter_forward(g, shape, key, kind):
    out = np.zeros(shape, dtype=g.dtype)
    if kind == "advanced":  # repeated indices must add up
        np.add.at(out, key, g)
    else:
        out[key] = g
    return out


# The gradient of indexing: zeros of the input's shape with the gradient placed at ``key``.
# Its own backward is indexing again, so double backward works.
INDEX_BACKWARD = Op("index_backward", "IndexBackwardBackward0",
                    forward=_scatter_forward,
                    backward=lambda ctx, g: (_index_op(g, ctx.key, ctx.kind),))


def _index_backward(g, shape, key, kind):
    return apply(INDEX_BACKWARD, g, shape=shape, key=key, kind=kind)


def _index_forward(a, key, kind, shape):
    if kind != "advanced":
        return a[key + (Ellipsis,)]  # the trailing ... keeps a 0-d result a view, not a scalar
    return a[key]


def _make_index_op(name, node, is_view):
    return Op(name, node, forward=_index_forward, view=is_view,
              backward=lambda ctx, g: (_index_backward(g, ctx.shape, ctx.key, ctx.kind),))


_SELECT = _make_index_op("select", "SelectBackward0", True)
_SLICE = _make_index_op("slice", "SliceBackward0", True)
_ADVANCED = _make_index_op("index", "IndexBackward0", False)
_INDEX_OPS = {"select": _SELECT, "slice": _SLICE, "advanced": _ADVANCED}


def _index_op(input, key, kind):
    return apply(_INDEX_OPS[kind], input, key=key, kind=kind, shape=input._data.shape)


def _is_advanced(item):
    return isinstance(item, (Tensor, np.ndarray, list)) or (
        isinstance(item, (bool, np.bool_)))


def _as_index(item):
    if isinstance(item, Tensor):
        if item.dtype.is_floating_point:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return item._data
    if isinstance(item, list):
        return np.asarray(item)
    return item


def _covers_dim(item, size):
    """Whether ``item`` is PyTorch's no-op slice: start 0 (or None), step 1, stop past the end."""
    return (item.start in (None, 0) and item.step in (None, 1)
            and (item.stop is None or item.stop >= size))


def getitem(input, key):
    """``input[key]``: ints select, slices slice, ``None`` inserts a dim, ``...`` skips dims,
    and integer or boolean tensors index (advanced indexing, a copy)."""
    items = key if isinstance(key, tuple) else (key,)
    if any(_is_advanced(item) for item in items):
        np_key = tuple(_as_index(item) for item in items)
        np_key = np_key[0] if len(np_key) == 1 else np_key
        return _index_op(input, np_key, "advanced")
    for item in items:
        if not (item is None or item is Ellipsis or isinstance(item, (int, np.integer, slice))):
            raise IndexError(
                "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
                f"are valid indices (got {type(item).__name__})"
            )
    # Basic indexing decomposes into one select / slice / unsqueeze per item, as in PyTorch.
    consumed = sum(1 for item in items if item is not None and item is not Ellipsis)
    if consumed > input.ndim:
        raise IndexError(
            f"too many indices for tensor of dimension {input.ndim}"
        )
    out = input
    dim = 0
    for item in items:
        if item is Ellipsis:
            dim += input.ndim - consumed
        elif item is None:
            out = unsqueeze(out, dim)
            dim += 1
        elif isinstance(item, slice):
            if isinstance(key, tuple) and _covers_dim(item, out._data.shape[dim]):
                # PyTorch's applySlicing skips a slice that keeps the whole dim (no node)
                dim += 1
                continue
            full = (slice(None),) * dim + (item,)
            out = _index_op(out, full, "slice")
            dim += 1
        else:
            size = out._data.shape[dim]
            index = int(item)
            if not -size <= index < size:
                raise IndexError(
                    f"index {index} is out of bounds for dimension {dim} with size {size}"
                )
            full = (slice(None),) * dim + (index,)
            out = _index_op(out, full, "select")
    if out is input:
        out = _index_op(input, (slice(None),), "slice") if input.ndim else view(input, ())
    return out


# ---- joining and splitting --------------------------------------------------------------

def _cat_forward(*arrays, dim, sizes):
    return np.concatenate(arrays, axis=dim)


def _cat_backward(ctx, g):
    grads = []
    start = 0
    for size, needed in zip(ctx.sizes, ctx.needs_input_grad):
        grads.append(narrow(g, ctx.dim, start, size) if needed else None)
        start += size
    return tuple(grads)


CAT = Op("cat", "CatBackward0", forward=_cat_forward, backward=_cat_backward)


def cat(tensors, dim=0):
    """Concatenate tensors along an existing ``dim`` (all other sizes must match)."""
    from .. import dtypes as _dtypes

    tensors = [t for t in tensors]
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"cat(): expected a sequence of Tensors, but element {i} is {type(t).__name__}")
    # PyTorch skips legacy 1-D empty tensors
    parts = [t for t in tensors if not (t.ndim == 1 and t._data.shape[0] == 0)] or tensors[:1]
    reference = parts[0]
    dim = _wrap_dim(dim, reference.ndim)
    for i, t in enumerate(parts):
        if t.ndim != reference.ndim:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {reference.ndim} and {t.ndim}")
        for d in range(reference.ndim):
            if d != dim and t._data.shape[d] != reference._data.shape[d]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {dim}. Expected size "
                    f"{reference._data.shape[d]} but got size {t._data.shape[d]} for tensor "
                    f"number {i} in the list.")
    dtype = _dtypes.result_type(*parts)
    parts = [t if t.dtype is dtype else t.to(dtype) for t in parts]
    return apply(CAT, *parts, dim=dim, sizes=tuple(t._data.shape[dim] for t in parts))


def stack(tensors, dim=0):
    """Join tensors of equal shape along a new ``dim``."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shape = tensors[0]._data.shape
    for i, t in enumerate(tensors):
        if t._data.shape != shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(shape)} at entry 0 "
                f"and {list(t._data.shape)} at entry {i}")
    dim = _wrap_dim(dim, len(shape) + 1)
    return cat([unsqueeze(t, dim) for t in tensors], dim)


def narrow(input, dim, start, length):
    """The view ``input[..., start:start + length, ...]`` along ``dim``."""
    dim = _wrap_dim(dim, input.ndim)
    size = input._data.shape[dim]
    if start < 0:
        start += size
    if not (0 <= start <= size and 0 <= length and start + length <= size):
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    key = (slice(None),) * dim + (slice(start, start + length),)
    return _index_op(input, key, "slice")


def select(input, dim, index):
    """The view at ``index`` along ``dim`` (that dimension is removed)."""
    dim = _wrap_dim(dim, input.ndim)
    size = input._data.shape[dim]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(input._data.shape)} at dimension {dim}")
    key = (slice(None),) * dim + (int(index),)
    return _index_op(input, key, "select")


def split(input, split_size_or_sections, dim=0):
    """Views of ``input`` in chunks of ``split_size`` (the last may be smaller) or of the
    given section sizes."""
    dim = _wrap_dim(dim, input.ndim)
    size = input._data.shape[dim]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0 and size:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}")
        sections = [min(step, size - s) for s in range(0, size, step)] if step else [0]
    else:
        sections = list(split_size_or_sections)
        if builtins.sum(sections) != size:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's "
                f"size at dimension {dim}), but got split_sizes={sections}")
    out, start = [], 0
    for length in sections:
        out.append(narrow(input, dim, start, length))
        start += length
    return tuple(out)


def chunk(input, chunks, dim=0):
    """Split into ``chunks`` nearly equal views (fewer if the size does not allow)."""
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: %d" % chunks)
    size = input._data.shape[_wrap_dim(dim, input.ndim)]
    step = max(1, -(-size // chunks))
    return split(input, step, dim)


def unbind(input, dim=0):
    dim = _wrap_dim(dim, input.ndim)
    return tuple(select(input, dim, i) for i in range(input._data.shape[dim]))


FLIP = Op("flip", "FlipBackward0", forward=lambda a, dims: np.flip(a, axis=dims).copy(),
          backward=lambda ctx, g: (flip(g, ctx.dims),))


def flip(input, dims):
    dims = tuple(_wrap_dim(d, input.ndim) for d in ((dims,) if isinstance(dims, int) else dims))
    return apply(FLIP, input, dims=dims)
