"""Index-based ops: ``gather``, ``scatter``, ``scatter_add``, ``index_select``, ``index_add``,
``masked_fill``, ``sort`` and ``topk``.

The gradient of a gather is a scatter-add and the gradient of a scatter-add is a gather, so
each rule below is written with the other op and double backward works throughout.
"""

from __future__ import annotations

import numpy as np

from gradviz_ext import engine as _engine

from .. import _memory_format
from .. import dtypes as _dtypes
from .._tensor import C_TYPE_NAMES, TYPE_WORDS, Tensor, _int_arg, _wrap, _wrap_dim
from ._creation import allocation_error, zeros, zeros_like
from ._pointwise import _broadcast_error, checked_integer, eq, logical_and, where, where_zero
from ._reduction import sum as _sum
from ._registry import Op, apply, check_saveable, declare, exports, numpy_names
from ._saved import (
    DIM,
    RESULT,
    SELF,
    SELF_SIZES,
    Attr,
    Computed,
    Input,
    NotKept,
    passed,
    shape_attr,
    tensor_attr,
)
from ._scatter_add import add_at, add_rows
from ._shape import _shape_arg, cat, expand_target, reshape, unsqueeze


def _index_array(index, what):
    if not isinstance(index, Tensor):
        raise TypeError(f"{what}(): index must be a Tensor, got {type(index).__name__}")
    if index.dtype is not _dtypes.int64 and index.dtype is not _dtypes.int32:
        raise RuntimeError(f"{what}(): Expected dtype int64 for index")
    return index._data


def _check_gather_shapes(what, input, dim, index):
    if index.ndim != input.ndim and not (index.ndim <= 1 and input.ndim <= 1):
        raise RuntimeError(f"Index tensor must have the same number of dimensions as {what} tensor")
    for d in range(index.ndim):
        if d != dim and index.shape[d] > (input.shape[d] if input.ndim else 1):
            raise RuntimeError(
                f"Size does not match at dimension {d} expected index {list(index.shape)} to be "
                f"smaller than self {list(input.shape)} apart from dimension {dim}"
            )
    # gather and the scatters take no negative positions (unlike indexing with [])
    if index.size and (index.min() < 0 or index.max() >= input.shape[dim]):
        bad = index.max() if index.max() >= input.shape[dim] else index.min()
        raise RuntimeError(f"index {bad} is out of bounds for dimension {dim} with size {input.shape[dim]}")


def _check_index_within_src(input, index, dim, src):
    """torch's check that ``index`` picks no entry past ``src`` (numpy's slice of a smaller src
    would be broadcast over the index, silently)."""
    if isinstance(src, Tensor) and src.ndim == index.ndim and any(
            i > s for i, s in zip(index.shape, src._data.shape)):
        raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self {list(input.shape)} "
                           f"apart from dimension {dim} and to be no larger size than src {list(src.shape)}")


def _grid(index, dim):
    """numpy fancy-index tuple selecting ``index`` along ``dim`` (other axes by position)."""
    grids = list(np.indices(index.shape, sparse=True))
    grids[dim] = index
    return tuple(grids)


# ---- gather / scatter_add ---------------------------------------------------------------

# scatter, scatter_add, index_fill: the dim as passed, the index tensor itself
INDEX_SAVED = {"dim": DIM, "index": Computed(tensor_attr("index_tensor"))}


def _gather_forward(a, index, dim, shape, **_):
    if a.ndim == 0:
        return a[()] if index.ndim == 0 else np.full(index.shape, a)
    return a[_grid(index, dim)]


GATHER = Op("gather", "GatherBackward0", forward=_gather_forward,
            backward=lambda ctx, g: (_scatter_add_into_zeros(g, ctx.index_tensor, ctx.dim, ctx.shape),),
            saved={
                "dim": DIM, "index": Computed(tensor_attr("index_tensor")),
                "sparse_grad": Computed(lambda node: False),
                "self": NotKept("gather's backward needs only the input's shape, which gradviz keeps "
                                "(grad_fn.shape) instead of the tensor"),
            })


@declare(method=True)
@numpy_names
def gather(input, dim, index, *, sparse_grad=False):
    """Values of ``input`` at ``index`` along ``dim``: ``out[i][j] = input[index[i][j]][j]`` for dim 0."""
    array = _index_array(index, "gather")
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    _check_gather_shapes("input", input._data, dim, array)
    check_saveable(index, input)
    return apply(GATHER, input, index=array, index_tensor=index, dim=dim, shape=input._data.shape,
                 dim_arg=dim_arg)  # Note [Saved ints as passed]


def _scatter_add_forward(a, src, index, dim, **_):
    out = a.copy()  # C order: add_at adds through its flat positions
    add_at(out, _grid(index, dim), src[tuple(slice(0, s) for s in index.shape)])
    return out


SCATTER_ADD = Op(
    "scatter_add", "ScatterAddBackward0", forward=_scatter_add_forward,
    backward=lambda ctx, g: (g if ctx.needs_input_grad[0] else None,
                             gather(g, ctx.dim, ctx.index_tensor) if ctx.needs_input_grad[1] else None),
    dtype=lambda a, src, **attrs: a.dtype, saved=INDEX_SAVED)


def _check_src_dtype(input, src):
    if isinstance(src, Tensor) and src.dtype is not input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")


@declare(method=True, inplace=True)
@numpy_names
def scatter_add(input, dim, index, src):
    """``input`` with ``src`` added at ``index`` along ``dim`` (repeated indices add up)."""
    if not isinstance(src, Tensor):  # no Scalar overload, unlike scatter
        raise TypeError(f"scatter_add(): argument 'src' (position 3) must be Tensor, not "
                        f"{type(src).__name__}")
    array = _index_array(index, "scatter_add")
    _check_src_dtype(input, src)
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    _check_gather_shapes("self", input._data, dim, array)
    _check_index_within_src(input, array, dim, src)
    check_saveable(index, src)
    return apply(SCATTER_ADD, input, src, index=array, index_tensor=index, dim=dim, dim_arg=dim_arg)


def _scatter_add_into_zeros(g, index, dim, shape):
    if not shape:  # a 0-d input (sort, topk of one entry): its one entry was picked
        return reshape(g, ())
    return scatter_add(zeros(shape, dtype=g.dtype), dim, index, g)


def _scatter_forward(a, *rest, index, dim, value, **_):
    out = a.copy()
    if rest:
        src = rest[0]
        out[_grid(index, dim)] = src[tuple(slice(0, s) for s in index.shape)]
    else:
        out[_grid(index, dim)] = value
    return out


def _scatter_backward(ctx, g, *unused):
    grad_self = None
    if ctx.needs_input_grad[0]:
        mask = _wrap(_scatter_forward(np.zeros(ctx.shape, dtype=bool), index=ctx.index, dim=ctx.dim, value=True))
        grad_self = where_zero(mask, g)
    if len(ctx.needs_input_grad) == 1:
        return (grad_self,)
    grad_src = gather(g, ctx.dim, ctx.index_tensor) if ctx.needs_input_grad[1] else None
    return grad_self, grad_src


SCATTER_SRC = Op("scatter_src", "ScatterBackward0", forward=_scatter_forward,
                 backward=_scatter_backward, dtype=lambda a, *rest, **attrs: a.dtype,
                 saved=INDEX_SAVED)
SCATTER_VALUE = Op("scatter_value", "ScatterBackward1", forward=_scatter_forward,
                   backward=_scatter_backward, saved=INDEX_SAVED)


@declare(method=True, inplace=True)
@numpy_names
def scatter(input, dim, index, src=None, *, value=None):
    """``input`` with entries at ``index`` along ``dim`` replaced by ``src`` (or ``value``)."""
    array = _index_array(index, "scatter")
    _check_src_dtype(input, src)
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    _check_gather_shapes("self", input._data, dim, array)
    _check_index_within_src(input, array, dim, src)
    attrs = dict(index=array, index_tensor=index, dim=dim, shape=input._data.shape, dim_arg=dim_arg)
    check_saveable(index, input, src)
    if isinstance(src, Tensor):
        return apply(SCATTER_SRC, input, src, value=None, **attrs)
    fill = src if src is not None else value
    if fill is None:
        raise TypeError("scatter() needs either a src Tensor or a value")
    return apply(SCATTER_VALUE, input, value=fill, **attrs)


# ---- index_select / index_add -----------------------------------------------------------

def _index_select_forward(a, index, dim, shape, **_):
    # a 0-d input's one index (index_select checks there is one) selects it: 0-d, as torch
    return np.take(a, index, axis=dim) if a.ndim else a.copy()


INDEX_SELECT = Op("index_select", "IndexSelectBackward0", forward=_index_select_forward,
                  backward=lambda ctx, g: (_index_add_into_zeros(g, ctx.dim, ctx.index_tensor, ctx.shape)
                                           if ctx.shape else g,),
                  saved={"dim": DIM, "index": Computed(tensor_attr("index_tensor")),
                      "self_sym_sizes": SELF_SIZES})


def _check_index_vector(index, what):
    if index.ndim > 1:
        raise IndexError(f"{what}(): Index is supposed to be a vector")


@declare(method=True)
@numpy_names
def index_select(input, dim, index):
    """Entries of ``input`` at the positions ``index`` (a vector) along ``dim``."""
    if isinstance(index, Tensor):  # the shape before the dtype, as torch
        _check_index_vector(index._data, "index_select")
    array = _index_array(index, "index_select")
    if array.ndim == 0 and input.ndim:  # a 0-d index selects one slice, keeping the dim (torch)
        array = array.reshape(1)
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    size = input._data.shape[dim] if input.ndim else 1
    if input.ndim == 0 and array.size != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got "
                           f"{array.size} value(s)")
    if array.size and size == 0 and input.ndim > 1:  # torch's check for 2+ dims
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    if array.size and (array.max() >= size or array.min() < 0):
        raise IndexError("index out of range in self")
    check_saveable(index, input)
    return apply(INDEX_SELECT, input, index=array, index_tensor=index, dim=dim, shape=input._data.shape,
                 dim_arg=dim_arg)


def _index_add_forward(a, source, index, dim, alpha, **_):
    out = a.copy()
    moved = np.moveaxis(out, dim, 0)
    add_rows(moved, index, np.moveaxis(source * alpha if alpha != 1 else source, dim, 0))
    return out


def _saves_source(needs):
    """index_add and index_copy keep ``source`` (input 1) for its own gradient, as PyTorch."""
    return ((1,) if needs[1] else ()), False


# the source and its dims; index_add's index too, only for the source's gradient
SOURCE_SAVED = {"dim": DIM, "source": Input(1), "source_dim": Attr("source_dim")}
INDEX_ADD = Op(
    "index_add", "IndexAddBackward0", forward=_index_add_forward,
    backward=lambda ctx, g: (
        g if ctx.needs_input_grad[0] else None,
        (index_select(g, ctx.dim, ctx.index_tensor) * ctx.alpha) if ctx.needs_input_grad[1] else None),
    dtype=lambda a, source, **attrs: a.dtype, saves=_saves_source,
    saved={**SOURCE_SAVED, "alpha": Attr("alpha"),
           "index": Computed(tensor_attr("index_tensor", needed_by=1))})


def _check_index_add_source(shape, source_shape, count, dim):
    """torch's checks of index_add's source: ``shape`` but along ``dim``, one row per index
    (numpy would broadcast a source of the wrong shape, or add too few rows)."""
    if shape and (len(source_shape) != len(shape) or any(
            a != b for d, (a, b) in enumerate(zip(shape, source_shape)) if d != dim)):
        raise RuntimeError("source tensor shape must match self tensor shape, excluding the specified "
                           f"dimension. Got self.shape = {list(shape)} source.shape = {list(source_shape)}")
    rows = source_shape[dim] if source_shape else 1
    if count != rows:
        raise RuntimeError(f"index_add_(): Number of indices ({count}) should be equal to source.size(dim): "
                           f"({rows}), for dim: {dim}")


@declare(method=True, inplace=True)
@numpy_names
def index_add(input, dim, index, source, *, alpha=1):
    """``input`` with ``alpha * source`` added at the positions ``index`` along ``dim``."""
    array = _index_array(index, "index_add")
    _check_index_vector(array, "index_add")
    if isinstance(source, Tensor) and source.dtype is not input.dtype:
        raise RuntimeError(f"index_add_(): self ({TYPE_WORDS[input.dtype.name]}) and source "
                           f"({TYPE_WORDS[source.dtype.name]}) must have the same scalar type")
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    if isinstance(source, Tensor):
        _check_index_add_source(input._data.shape, source._data.shape, array.size, dim)
    size = input._data.shape[dim] if input.ndim else 1
    outside = np.flatnonzero((array < 0) | (array >= size))
    if outside.size:
        # torch takes no negative positions here, unlike indexing with []
        raise RuntimeError(f"index {int(array.reshape(-1)[outside[0]])} is out of bounds for dimension {dim} "
                           f"with size {size}")
    check_saveable(index, source)
    return apply(INDEX_ADD, input, source, index=array, index_tensor=index, dim=dim, alpha=alpha,
                 dim_arg=dim_arg, source_dim=source.ndim if isinstance(source, Tensor) else 0)


def _index_add_into_zeros(g, dim, index, shape):
    if index.ndim == 0 and len(shape):  # index_select's 0-d index kept the dim
        index = index.reshape(1)
    return index_add(zeros(shape, dtype=g.dtype), dim, index, g)


# ---- masked_fill ------------------------------------------------------------------------

# Note [Masked fill as a copy]
# ``np.where(mask, value, a)`` reads the mask, the value and ``a`` for every element and picks
# one; a copy of ``a`` with the value written where the mask is true (``np.copyto(where=)``)
# moves the same bytes to the same places, so the result is the same, bit for bit, including
# the value's conversion to ``a``'s dtype (the same ``np.asarray``). It is taken where the
# output would be ``a``'s shape and memory order: ``a`` C-contiguous and the mask broadcast to
# it (np.where's output is then C-contiguous too); elsewhere np.where decides the layout.
# The GPT of bench/models.py fills its 16 x 4 x 32 x 32 float32 attention scores with -inf
# above the diagonal (forward) and their gradient with 0 (backward), four times a step:
# 57 -> 34 us each (medians of 3 x 300 calls alternating in one process).
def _masked_fill_forward(a, mask, value, mask_tensor):
    fill = np.asarray(value, dtype=a.dtype)
    if a.flags.c_contiguous and np.broadcast_shapes(a.shape, mask.shape) == a.shape:
        out = a.copy()
        np.copyto(out, fill, where=mask)
        return out
    return np.where(mask, fill, a)


MASKED_FILL = Op("masked_fill", "MaskedFillBackward0", forward=_masked_fill_forward,
                 backward=lambda ctx, g: (masked_fill(g, ctx.mask_tensor, 0),),
                 fast_backward=lambda ctx, g: (_masked_fill_forward(g, ctx.mask, 0, None),),
                 saved={"mask": Computed(tensor_attr("mask_tensor"))})


@declare(method=True, inplace=True)
def masked_fill(input, mask, value):
    """``input`` with ``value`` where the boolean ``mask`` (broadcastable) is true."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"masked_fill(): argument 'mask' must be Tensor, not {type(mask).__name__}"
                        f"; pass a bool tensor shaped like the input (or broadcastable to it)")
    error = _broadcast_error(input._data, mask._data)  # the shapes before the dtype, as torch
    if error is not None:
        raise error
    if mask.dtype is not _dtypes.bool:
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{C_TYPE_NAMES[mask.dtype.name]}")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(
                "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                f"{value.ndim} dimension(s)."
            )
        value = value.item()
    if type(value) in (int, float) and input._data.dtype.kind in "iu":
        value = checked_integer(value, input._data.dtype)
    check_saveable(mask, input)
    return apply(MASKED_FILL, input, mask=mask._data, value=value, mask_tensor=mask)


# ---- sort / topk ------------------------------------------------------------------------

def _take_backward(ctx, g, g_indices=None):
    return (_scatter_add_into_zeros(g, ctx.indices_tensor, ctx.dim, ctx.shape),)


_TAKEN = {"dim": DIM, "indices": Computed(tensor_attr("indices_tensor")), "self_sym_sizes": SELF_SIZES}
SORT = Op("sort", "SortBackward0", forward=lambda a, values, **attrs: values, backward=_take_backward,
          saved=_TAKEN)
TOPK = Op("topk", "TopkBackward0", forward=lambda a, values, **attrs: values, backward=_take_backward,
          saved=_TAKEN)


def _sorted_indices(array, dim, descending, stable):
    if array.ndim == 0:
        return np.zeros((), dtype=np.int64)
    if descending:
        # stable descending: sort the negation for numbers; keep NaN first like torch
        order = np.argsort(-array if array.dtype.kind != "b" else ~array, axis=dim, kind="stable")
    else:
        order = np.argsort(array, axis=dim, kind="stable")
    return order.astype(np.int64)


def _with_indices(op, input, indices, dim, dim_arg):
    values = np.take_along_axis(input._data, indices, axis=dim) if input.ndim else input._data.copy()
    indices_tensor = _wrap(indices)
    out = apply(op, input, values=values, indices_tensor=indices_tensor, dim=dim, shape=input._data.shape,
                dim_arg=dim_arg)  # Note [Saved ints as passed]
    return RETURN_TYPES[op.name](out, indices_tensor)


class _ValuesIndices(tuple):
    """``(values, indices)`` with attribute access; prints like ``torch.return_types.max``."""

    __slots__ = ()

    def __new__(cls, values, indices):
        return super().__new__(cls, (values, indices))

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]

    def __repr__(self) -> str:
        return (f"gradviz.return_types.{type(self).__name__}(\nvalues={self[0]!r},\n"
                f"indices={self[1]!r})")

    def __reduce__(self):
        return (_rebuild_values_indices, (type(self).__name__, self[0], self[1]))


def _rebuild_values_indices(name, values, indices):
    return RETURN_TYPES[name](values, indices)


# one class per function, named as in torch.return_types
RETURN_TYPES = {name: type(name, (_ValuesIndices,),
                           {"__slots__": (), "__module__": "gradviz.return_types"})
                for name in ("max", "min", "sort", "topk", "median", "mode", "nanmedian")}


@declare(method=True)
@numpy_names
def sort(input, dim=-1, descending=False, stable=False):
    """Sorted values and their indices along ``dim``; indices are not differentiable."""
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    return _with_indices(SORT, input, _sorted_indices(input._data, dim, descending, stable), dim, dim_arg)


@declare(method=True)
@numpy_names
def argsort(input, dim=-1, descending=False, stable=False):
    """The indices that sort ``input`` along ``dim``. Mirrors ``torch.argsort``."""
    dim = _wrap_dim(dim, input.ndim)
    return _wrap(_sorted_indices(input._data, dim, descending, stable))


@declare(method=True)
@numpy_names
def topk(input, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """The ``k`` largest (or smallest) values along ``dim`` and their indices."""
    k = _int_arg(k, "k")
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    size = input._data.shape[dim] if input.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    order = _sorted_indices(input._data, dim, largest, True)
    indices = np.take(order, np.arange(k), axis=dim) if input.ndim else order
    return _with_indices(TOPK, input, indices, dim, dim_arg)


# ---- masked_select, nonzero, repeat -----------------------------------------------------

def _masked_select_forward(a, mask, shape, **_):
    return np.broadcast_to(a, shape)[np.broadcast_to(mask, shape)]


def _masked_select_backward(ctx, g):
    flat = _index_add_into_zeros(g, 0, ctx.positions_tensor, (int(np.prod(ctx.shape)),))
    return (reshape(flat, ctx.shape),)


MASKED_SELECT = Op("masked_select", "MaskedSelectBackward0", forward=_masked_select_forward,
                   backward=_masked_select_backward,
                   saved={"mask": Computed(tensor_attr("mask_tensor")),
                          "self": NotKept("masked_select's backward needs only the input's shape, "
                                          "which gradviz keeps (grad_fn.shape) instead")})


@declare(method=True)
def masked_select(input, mask):
    """The elements of ``input`` where the boolean ``mask`` (broadcastable) is true, as 1-D."""
    if not isinstance(mask, Tensor) or mask.dtype is not _dtypes.bool:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = np.broadcast_shapes(input._data.shape, mask._data.shape)
    positions = np.flatnonzero(np.broadcast_to(mask._data, shape)).astype(np.int64)
    return apply(MASKED_SELECT, input, mask=mask._data, mask_tensor=mask, shape=shape,
                 positions=positions, positions_tensor=_wrap(positions))


@declare(method=True)
def nonzero(input, *, as_tuple=False):
    """Indices of the nonzero elements: an (n, ndim) int64 tensor, or one tensor per dim."""
    found = np.nonzero(input._data if input.ndim else input._data.reshape(1))
    if as_tuple:
        return tuple(_wrap(np.asarray(i, dtype=np.int64)) for i in found)
    if not input.ndim:  # one row (or none) of no coordinates
        return _wrap(np.zeros((found[0].size, 0), dtype=np.int64))
    return _wrap(np.stack(found, axis=1).astype(np.int64).reshape(-1, input.ndim))


def _repeat_backward(ctx, g):
    # g has shape (r0 * s0, r1 * s1, ...): split each dim into (r, s) and sum the r's away
    split = []
    for r, s in zip(ctx.repeats, ctx.padded):
        split += [r, s]
    summed = _sum(reshape(g, tuple(split)), tuple(range(0, len(split), 2)))
    return (reshape(summed, ctx.shape),)


REPEAT = Op("repeat", "RepeatBackward0",
            forward=lambda a, repeats, padded, shape: np.tile(a.reshape(padded), repeats),
            backward=_repeat_backward,
            saved={"repeats": Attr("repeats", tuple), "self_sym_sizes": SELF_SIZES})


@declare(name=False, method=True)
def repeat(input, *repeats):
    """``input`` tiled ``repeats[i]`` times along each dim (extra leading dims allowed)."""
    repeats = _shape_arg(repeats)
    if len(repeats) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    if any(r < 0 for r in repeats):
        raise RuntimeError(f"Trying to create tensor with negative dimension "
                           f"{min(repeats)}: {list(repeats)}")
    padded = (1,) * (len(repeats) - input.ndim) + tuple(input._data.shape)
    try:
        return apply(REPEAT, input, repeats=repeats, padded=padded, shape=tuple(input._data.shape))
    except MemoryError:
        sizes = [n * r for n, r in zip(padded, repeats)]
        raise allocation_error(sizes, input._data.dtype) or MemoryError(sizes) from None


# Note [Repeat interleave graph]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``repeat_interleave`` is composed, and its nodes are PyTorch's: without a ``dim`` the input
# is flattened first (``ViewBackward0``, none for a 1-D input); an int ``repeats`` then gives
# unsqueeze, expand, a contiguous clone and a flatten of the two dims (``ViewBackward0`` <-
# ``CloneBackward0`` <- ``ExpandBackward0`` <- ``UnsqueezeBackward0``), a tensor ``repeats``
# one ``index_select`` along the dim as passed (``IndexSelectBackward0``). Both copy entries,
# so the values and gradients are those of the one ``index_select`` gradviz used before.

@declare(method=True)
@numpy_names
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Repeat each element ``repeats`` times (an int, or a tensor with one count per element)
    along ``dim`` (the flattened input when ``dim`` is None), recorded as PyTorch records it
    (Note [Repeat interleave graph])."""
    if repeats is None:  # repeat_interleave(counts): the indices repeated by their counts
        counts = input.numpy()
        return _wrap(np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts))
    if not isinstance(repeats, Tensor):
        return _repeat_each(input, _int_arg(repeats, "repeats"), dim, output_size)
    flat = input.flatten() if dim is None else input
    dim = 0 if dim is None else dim
    if flat.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    size = flat.shape[_wrap_dim(dim, flat.ndim)]
    counts = repeats.numpy()
    if counts.ndim > 1 or (counts.size != 1 and counts.size != size):
        raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                           f"repeats.size(0) = {counts.size} and input.size({dim}) = {size}")
    if np.any(counts < 0):
        raise RuntimeError("repeats can not be negative")
    try:
        positions = np.repeat(np.arange(size, dtype=np.int64), counts.reshape(-1))
    except MemoryError:
        total = int(np.sum(np.broadcast_to(counts, (size,)), dtype=object))
        raise allocation_error((total,), np.int64) or MemoryError(total) from None
    return index_select(flat, dim, _wrap(positions))


def _repeat_each(input, repeats, dim, output_size):
    """``repeat_interleave`` with an int ``repeats``: each entry repeated by expanding a new dim
    after ``dim`` and copying (Note [Repeat interleave graph])."""
    flat = input.flatten() if dim is None else input
    dim = _wrap_dim(0 if dim is None else dim, input.ndim)  # torch wraps against the input's dims
    if repeats < 0:
        raise RuntimeError("Repeats must be non-negative")
    spread = unsqueeze(flat, dim + 1)
    sizes = list(spread.shape)
    if output_size is not None and output_size != sizes[dim] * repeats:
        raise RuntimeError(f"repeat_interleave: Invalid output_size, expected "
                           f"{sizes[dim] * repeats} but got {output_size}")
    sizes[dim + 1] = repeats
    try:
        copied = spread.expand(*sizes).clone(memory_format=_memory_format.contiguous_format)
    except MemoryError:
        sizes[dim:dim + 2] = [sizes[dim] * repeats]
        raise allocation_error(sizes, input._data.dtype) or MemoryError(sizes) from None
    return copied.flatten(dim, dim + 1)


def _roll_backward(ctx, g):
    shifts = ctx.shifts
    return (roll(g, -shifts if ctx.dims is None else tuple(-s for s in shifts), ctx.dims),)


# PyTorch saves shifts and dims as passed, as lists: an int shift is one entry, no dims none
ROLL = Op("roll", "RollBackward0",
          forward=lambda a, shifts, dims, **_: (a.copy() if a.size == 0
                                                else np.roll(a, shifts, axis=dims) if dims is not None
                                                else np.roll(a, shifts)),
          backward=_roll_backward,
          saved={"shifts": passed("shifts", many=True), "dims": passed("dims", many=True)})


@declare(method=True)
def roll(input, shifts, dims=None):
    """Shift elements cyclically by ``shifts`` along ``dims`` (the flattened tensor without)."""
    if dims is None:
        if isinstance(shifts, (tuple, list)):
            shifts = shifts[0]
        return apply(ROLL, input, shifts=_int_arg(shifts, "shifts"), dims=None, dims_arg=())
    shifts = tuple(_int_arg(s, "shifts") for s in
                   (shifts if isinstance(shifts, (tuple, list)) else (shifts,)))
    dims = tuple(_int_arg(d, "dims") for d in (dims if isinstance(dims, (tuple, list)) else (dims,)))
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    dims_arg = dims
    if input.numel():  # torch returns an empty tensor's copy before it checks the dims
        dims = tuple(_wrap_dim(d, input.ndim) for d in dims)
    return apply(ROLL, input, shifts=shifts, dims=dims, dims_arg=dims_arg)


# ---- index_fill, index_copy, masked_scatter ---------------------------------------------------

def _index_fill_forward(a, *value, index, dim, number, **_):
    out = a.copy()
    key = (slice(None),) * dim + (index,)
    out[key] = value[0] if value else number
    return out


def _index_fill_backward(ctx, g):
    index = _wrap(ctx.index)
    grad_self = index_fill(g, ctx.dim, index, 0) if ctx.needs_input_grad[0] else None
    if len(ctx.needs_input_grad) == 1:
        return (grad_self,)
    grad_value = index_select(g, ctx.dim, index).sum() if ctx.needs_input_grad[1] else None
    return grad_self, grad_value


INDEX_FILL = Op("index_fill", "IndexFillBackward0", forward=_index_fill_forward,
                backward=_index_fill_backward, saved=INDEX_SAVED)
INDEX_FILL_TENSOR = Op("index_fill_tensor", "IndexFillBackward1", forward=_index_fill_forward,
                       backward=_index_fill_backward,
                       dtype=lambda a, value, **_: a.dtype, saved=INDEX_SAVED)


def _check_index_for(what, input, dim, index):
    if not isinstance(index, Tensor) or index.dtype is not _dtypes.int64:
        if what == "index_fill":  # torch's own words and type for each
            raise IndexError("index_fill_(): Expected dtype int64 for index.")
        got = TYPE_WORDS[index.dtype.name] if isinstance(index, Tensor) else type(index).__name__
        raise RuntimeError(f"{what}_(): Expected a long tensor for index, but got {got}")
    _check_index_vector(index, what)
    size = input.shape[dim] if input.ndim else 1
    data = index._data.reshape(-1)
    # index_fill counts negative positions from the end; index_copy takes none, and names itself
    lowest = -size if what == "index_fill" else 0
    if data.size and (data.max() >= size or data.min() < lowest):
        bad = int(data.max() if data.max() >= size else data.min())
        prefix = "index_copy_(): " if what == "index_copy" else ""
        raise IndexError(f"{prefix}index {bad} is out of bounds for dimension {dim} with size {size}")
    return data


@declare(method=True, inplace=True)
@numpy_names
def index_fill(input, dim, index, value):
    """``input`` with the slices at ``index`` along ``dim`` set to ``value`` (a number or a
    0-d tensor, which then gets their gradient's sum)."""
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    array = _check_index_for("index_fill", input, dim, index)
    attrs = dict(index=array, index_tensor=index, dim=dim, dim_arg=dim_arg)
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError("index_fill_ only supports a 0-dimensional value tensor, but got "
                               f"tensor with {value.ndim} dimension(s).")
        return apply(INDEX_FILL_TENSOR, input, value, number=None, **attrs)
    if type(value) in (int, float) and input._data.dtype.kind in "iu":
        value = checked_integer(value, input._data.dtype)
    return apply(INDEX_FILL, input, number=value, **attrs)


def _index_copy_forward(a, source, index, dim, **_):
    out = a.copy()
    key = (slice(None),) * dim + (index,)
    out[key] = source
    return out


def _index_copy_backward(ctx, g):
    index = _wrap(ctx.index)
    return (index_fill(g, ctx.dim, index, 0) if ctx.needs_input_grad[0] else None,
            index_select(g, ctx.dim, index) if ctx.needs_input_grad[1] else None)


INDEX_COPY = Op("index_copy", "IndexCopyBackward0", forward=_index_copy_forward,
                backward=_index_copy_backward, saves=_saves_source,
                saved={**SOURCE_SAVED, "index": Computed(tensor_attr("index_tensor"))})


@declare(method=True, inplace=True)
@numpy_names
def index_copy(input, dim, index, source):
    """``input`` with the slices at ``index`` along ``dim`` replaced by ``source``'s."""
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    array = _check_index_for("index_copy", input, dim, index)
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, "
                           f"but got (self) {input.dtype.name.capitalize()} and (source) "
                           f"{source.dtype.name.capitalize()}")
    expected = list(input.shape)
    if input.ndim:
        expected[dim] = len(array)
    if list(source.shape) != expected:
        raise IndexError(f"index_copy_(): Source/destination tensor must have same slice shapes. "
                         f"Destination slice shape: {expected} and source slice shape: "
                         f"{list(source.shape)}")
    return apply(INDEX_COPY, input, source, index=array, dim=dim, dim_arg=dim_arg, index_tensor=index,
                 source_dim=source.ndim)


def _masked_scatter_forward(a, source, mask, **_):
    out = a.copy()
    where = np.broadcast_to(mask, out.shape)
    out[where] = source.reshape(-1)[:int(where.sum())]
    return out


def _masked_scatter_backward(ctx, g):
    mask = _wrap(ctx.mask)
    grad_self = masked_fill(g, mask, 0) if ctx.needs_input_grad[0] else None
    grad_source = None
    if ctx.needs_input_grad[1]:
        taken = masked_select(g, mask)
        rest = ctx.source_numel - taken.numel()
        if rest:
            taken = cat([taken, zeros(rest, dtype=g.dtype)], 0)
        grad_source = reshape(taken, ctx.source_shape)
    return grad_self, grad_source


MASKED_SCATTER = Op("masked_scatter", "MaskedScatterBackward0", forward=_masked_scatter_forward,
                    backward=_masked_scatter_backward,
                    saved={"mask": Computed(tensor_attr("mask_tensor")),
                           "source_sym_sizes": shape_attr("source_shape")})


@declare(method=True, inplace=True)
def masked_scatter(input, mask, source):
    """``input`` with the entries where ``mask`` is true taken, in order, from ``source``."""
    if not isinstance(mask, Tensor) or mask.dtype is not _dtypes.bool:
        raise RuntimeError("masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but "
                           f"got {input.dtype.name.capitalize()} and {source.dtype.name.capitalize()}"
                           f": convert source with .to(self.dtype)")
    expand_target(mask, input._data.shape)  # torch's error for a mask that does not broadcast
    count = int(np.broadcast_to(mask._data, input._data.shape).sum())
    if count > source.numel():
        raise RuntimeError("masked_scatter: expected source to have at least as many elements as "
                           f"the ones selected by the mask: {count} selected, source has "
                           f"{source.numel()}")
    return apply(MASKED_SCATTER, input, source, mask=mask._data, mask_tensor=mask,
                 source_numel=source.numel(), source_shape=tuple(source.shape))


# ---- scatter_reduce ----------------------------------------------------------------------------

_REDUCE_UFUNCS = {"sum": np.add, "prod": np.multiply, "mean": np.add, "amax": np.maximum,
                  "amin": np.minimum}


def _reduce_identity(reduce, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "f":
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _first_zeros(out, a, grid, values, dim, include_self):
    """Where amax or amin of floats is a zero, the zero torch keeps: its kernel replaces the
    value only by a strictly larger (smaller) one, so of +0.0 and -0.0 the first wins, ``a``'s
    own when it counts, else the scattered one with the lowest position along ``dim``;
    ``np.maximum.at`` (``minimum``) keeps the later one. In place on ``out``."""
    zero_out = out == 0
    if not zero_out.any():
        return
    targets = np.ravel_multi_index(np.broadcast_arrays(*grid), a.shape)
    # along ``dim`` first, so a target's first occurrence is its lowest position along dim
    targets, candidates = np.moveaxis(targets, dim, 0).ravel(), np.moveaxis(values, dim, 0).ravel()
    zero_src = candidates == 0
    positions, first = np.unique(targets[zero_src], return_index=True)
    kept = zero_out.reshape(-1)[positions]  # a zero result there (not a larger value, nor NaN)
    out.reshape(-1)[positions[kept]] = candidates[zero_src][first[kept]]  # out: a fresh copy
    if include_self:
        own = zero_out & (a == 0)
        out[own] = a[own]


def _scatter_reduce_forward(a, src, index, dim, reduce, include_self, **_):
    out = a.copy()
    grid = _grid(index, dim)
    values = src[tuple(slice(0, n) for n in index.shape)]
    touched = np.zeros(a.shape, dtype=bool)
    touched[grid] = True
    if not include_self:
        out[touched] = _reduce_identity(reduce, a.dtype)
    _REDUCE_UFUNCS[reduce].at(out, grid, values)
    if reduce in ("amax", "amin") and a.dtype.kind == "f" and index.size:
        _first_zeros(out, a, grid, values, dim, include_self)
    if reduce == "mean":
        counts = np.where(touched & include_self, 1, 0) + np.zeros(a.shape, dtype=np.int64)
        add_at(counts, grid, 1)
        divided = out / np.maximum(counts, 1)
        out = divided.astype(a.dtype) if a.dtype.kind == "f" else (out // np.maximum(counts, 1))
    return out


def _scatter_reduce_backward(ctx, g):
    """PyTorch's ``scatter_reduce_backward``, written with gradviz ops."""
    x, src = ctx.input(0), ctx.input(1)
    index, dim, reduce = ctx.index_tensor, ctx.dim, ctx.reduce
    touched = _wrap(ctx.touched)
    grad_self = grad_src = None
    if reduce == "sum":
        grad_self, grad_src = g, gather(g, dim, index)
    elif reduce == "mean":
        counts = _wrap(ctx.counts.astype(g._data.dtype))
        grad_self = g / counts
        grad_src = gather(grad_self, dim, index)
    elif reduce in ("amax", "amin"):
        result = ctx.output()
        value = gather(result, dim, index)
        self_is_result = eq(x, result).to(g.dtype)
        src_is_result = eq(src, value).to(g.dtype)
        spread = g / scatter_add(self_is_result, dim, index, src_is_result)
        grad_self = self_is_result * spread
        grad_src = src_is_result * gather(spread, dim, index)
    else:  # prod: the products of the others, computed without dividing by a zero
        result = ctx.output()
        masked_self = masked_fill(x, eq(x, 0), 1)
        grad_self = g * scatter_reduce(masked_self, dim, index, src, "prod",
                                       include_self=ctx.include_self) / masked_self
        src_zero = eq(src, 0)
        zeros_before = gather(scatter_add(zeros_like(x), dim, index, src_zero.to(x.dtype)), dim, index)
        several_zeros = bool((zeros_before._data > 1).any())
        single_zero = logical_and(src_zero, eq(zeros_before, 1))
        masked_src_result = scatter_reduce(x, dim, index, masked_fill(src, single_zero, 1), "prod",
                                           include_self=ctx.include_self)
        grad_src = where(single_zero, gather(g * masked_src_result, dim, index),
                         gather(g * result, dim, index) / masked_fill(src, src_zero, 1))
        if several_zeros and grad_src.grad_fn is not None:
            grad_src = _refuse_double_backward(grad_src)
    if not ctx.include_self:
        grad_self = masked_fill(grad_self, touched, 0)
    return (grad_self if ctx.needs_input_grad[0] else None,
            grad_src if ctx.needs_input_grad[1] else None)


class _DoubleBackwardError(_engine.Node):
    """The ``grad_fn`` PyTorch gives a gradient it cannot differentiate again (its node is
    named "Error"): a backward pass that reaches it raises."""

    def __init__(self, tensor, message, edges=()):
        # PyTorch's Error node keeps the edges of the gradient it replaces, so a backward pass
        # toward the inputs reaches it (and raises) instead of finding no path
        _engine.Node.__init__(self, edges, (_engine.InputMeta(tensor._data.shape, tensor.dtype),))
        self.message = message

    def name(self):
        return "torch::autograd::Error"  # a C++ node in PyTorch, named as its name() gives it

    def _apply_grads(self, grads):
        raise RuntimeError(self.message)


def _refuse_double_backward(grad):
    """``grad``'s values with a ``grad_fn`` that raises PyTorch's error when differentiated:
    the product rule has no answer for two zeros meeting in one position."""
    refused = _wrap(grad._data.copy())
    refused.grad_fn = _DoubleBackwardError(
        refused, "scatter_reduce(): Double backward is unsupported for src when >1 zeros in src "
                 "are scattered to the same position in self", (_engine.gradient_edge(grad),))
    return refused


SCATTER_REDUCE = Op("scatter_reduce", "ScatterReduceBackward0", forward=_scatter_reduce_forward,
                    backward=_scatter_reduce_backward, dtype=lambda a, src, **_: a.dtype,
                    saves=lambda needs: ((0, 1), True),
                    saved={**INDEX_SAVED, "self": SELF, "src": Input(1), "reduce": Attr("reduce"),
                           "include_self": Attr("include_self"), "result": RESULT})


@declare(method=True, inplace=True)
@numpy_names
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """``input`` with each ``src`` entry combined into the position ``index`` names along
    ``dim``, by ``reduce``: "sum", "prod", "mean", "amax" or "amin" (``include_self=False``
    leaves ``input``'s own values out where something is scattered)."""
    if reduce not in _REDUCE_UFUNCS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    array = _index_array(index, "scatter_reduce")
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    _check_gather_shapes("self", input._data, dim, array)
    if src.dtype is not input.dtype:
        raise RuntimeError("scatter_reduce(): Expected self.dtype to be equal to src.dtype")
    touched = np.zeros(input._data.shape, dtype=bool)
    touched[_grid(array, dim)] = True
    counts = np.where(touched & include_self, 1, 0) + np.zeros(input._data.shape, dtype=np.int64)
    add_at(counts, _grid(array, dim), 1)
    return apply(SCATTER_REDUCE, input, src, index=array, index_tensor=index, dim=dim,
                 reduce=reduce, include_self=bool(include_self), touched=touched,
                 counts=np.maximum(counts, 1), dim_arg=dim_arg)


__all__ = exports(globals())
