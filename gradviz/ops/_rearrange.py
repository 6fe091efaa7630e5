"""Rearranging entries, as in PyTorch: ``tensor_split`` and ``hsplit``/``vsplit``/``dsplit``
(slice views, ``SliceBackward0``), ``take_along_dim`` (``GatherBackward0``), ``take``,
``rot90`` (``Rot90Backward0``), ``unflatten``, ``block_diag``, ``cartesian_prod``, ``msort``,
``atleast_3d``, ``dstack``, ``row_stack``, ``argwhere`` and ``histc``."""

from __future__ import annotations

import itertools

import numpy as np

from .. import dtypes as _dtypes
from .._tensor import TYPE_WORDS, Tensor, _wrap, _wrap_dim
from ._compose import diff, meshgrid, vstack
from ._creation import ones, zeros
from ._indexing import gather, index_add, index_select, nonzero, sort
from ._linalg import DIAG_EMBED
from ._reduction import cumprod, cumsum
from ._reduction import sum as _sum
from ._registry import Op, apply, declare, exports, numpy_names, promote
from ._saved import Attr, Computed, NotKept, passed, tensor_attr
from ._shape import _index_backward, _shape_arg, cat, expand, flip, narrow, reshape, split, stack, unsqueeze, view
from ._special import DIV_NUMBER

# ---- tensor_split and friends ----------------------------------------------------------------

def _split_at(input, dim, boundaries):
    """The slice views between consecutive ``boundaries`` (clamped into the dim, as PyTorch
    does), one ``SliceBackward0`` each."""
    size = input.shape[dim]
    pieces, start = [], 0
    for end in list(boundaries) + [size]:
        begin, stop = min(max(start, 0), size), min(max(int(end), 0), size)
        pieces.append(narrow(input, dim, begin, max(stop - begin, 0)))
        start = int(end)
    return tuple(pieces)


@declare(method=True)
@numpy_names
def tensor_split(input, indices_or_sections, dim=0):
    """Split ``input`` along ``dim`` into ``n`` nearly equal views (an int: the first
    ``size % n`` get one extra entry), or at the given indices (a list, or a 1-D tensor);
    unlike ``split``, the pieces' sizes need not divide the dim."""
    if input.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    dim = _wrap_dim(dim, input.ndim)
    if isinstance(indices_or_sections, Tensor):
        spec = indices_or_sections
        if spec.dtype is not _dtypes.int64:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have dtype of "
                               f"long, but got {TYPE_WORDS[spec.dtype.name]}")
        if spec.ndim > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                               "zero-dimensional or one-dimensional tensor, but got a tensor "
                               f"with {spec.ndim} dims")
        indices_or_sections = int(spec._data) if spec.ndim == 0 else spec._data.tolist()
    if isinstance(indices_or_sections, (list, tuple)):
        return _split_at(input, dim, indices_or_sections)
    sections = int(indices_or_sections)
    if sections <= 0:
        raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
    size = input.shape[dim]
    small, extra = divmod(size, sections)
    boundaries, position = [], 0
    for i in range(sections - 1):
        position += small + (1 if i < extra else 0)
        boundaries.append(position)
    return _split_at(input, dim, boundaries)


def _numpy_style_split(name, input, indices_or_sections, dim, min_dims):
    if input.ndim < min_dims:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dims} dimension, "
                           f"but got a tensor with {input.ndim} dimensions!")
    if isinstance(indices_or_sections, int):
        size = input.shape[dim]
        if indices_or_sections == 0 or size % indices_or_sections:
            raise RuntimeError(
                f"torch.{name} attempted to split along dimension {dim}, but the size of the "
                f"dimension {size} is not divisible by the split_size {indices_or_sections}!")
    return tensor_split(input, indices_or_sections, dim)


@declare(method=True)
def hsplit(input, indices_or_sections):
    """``tensor_split`` along dim 1 (dim 0 for 1-D); an int must divide the dim."""
    if input.ndim == 0:
        raise RuntimeError("torch.hsplit requires a tensor with at least 1 dimension, but got a "
                           "tensor with 0 dimensions!")
    return _numpy_style_split("hsplit", input, indices_or_sections, 1 if input.ndim > 1 else 0, 1)


@declare(method=True)
def vsplit(input, indices_or_sections):
    """``tensor_split`` along dim 0 of a tensor of 2 or more dims; an int must divide it."""
    return _numpy_style_split("vsplit", input, indices_or_sections, 0, 2)


@declare(method=True)
def dsplit(input, indices_or_sections):
    """``tensor_split`` along dim 2 of a tensor of 3 or more dims; an int must divide it."""
    return _numpy_style_split("dsplit", input, indices_or_sections, 2, 3)


# ---- gathering ------------------------------------------------------------------------------------

@declare(method=True)
def take_along_dim(input, indices, dim=None):
    """The entries of ``input`` at ``indices`` along ``dim`` (``gather`` after broadcasting
    both except along ``dim``); with no ``dim``, at flat ``indices``."""
    if not isinstance(indices, Tensor) or indices.dtype is not _dtypes.int64:
        got = TYPE_WORDS[indices.dtype.name] if isinstance(indices, Tensor) else type(indices).__name__
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got {got}")
    if dim is None:
        return gather(reshape(input, (-1,)), 0, reshape(indices, (-1,)))
    if input.ndim != indices.ndim:
        raise RuntimeError(
            "torch.take_along_dim(): input and indices should have the same number of "
            f"dimensions, but got {input.ndim} dimensions for input, and {indices.ndim} "
            "dimensions for indices")
    dim = _wrap_dim(dim, input.ndim)
    input_shape, index_shape = list(input.shape), list(indices.shape)
    input_shape[dim] = index_shape[dim] = 1
    try:
        common = list(np.broadcast_shapes(tuple(input_shape), tuple(index_shape)))
    except ValueError:
        mismatch = next(d for d in range(input.ndim)
                        if input_shape[d] != index_shape[d] and 1 not in (input_shape[d], index_shape[d]))
        raise RuntimeError(f"The size of tensor a ({input_shape[mismatch]}) must match the size of "
                           f"tensor b ({index_shape[mismatch]}) at non-singleton dimension "
                           f"{mismatch}") from None
    input_target, index_target = list(common), list(common)
    input_target[dim], index_target[dim] = input.shape[dim], indices.shape[dim]
    if list(input.shape) != input_target:
        input = expand(input, *input_target)
    if list(indices.shape) != index_target:
        indices = expand(indices, *index_target)
    return gather(input, dim, indices)


def _take_forward(a, index, shape, index_tensor=None):
    return a.reshape(-1)[index]


def _take_backward(ctx, g):
    flat = index_add(zeros(int(np.prod(ctx.shape, dtype=np.int64)), dtype=g.dtype), 0,
                     _wrap(ctx.index.reshape(-1)), reshape(g, (-1,)))
    return (reshape(flat, ctx.shape),)


TAKE = Op("take", "TakeBackward0", forward=_take_forward, backward=_take_backward,
          saved={"index": Computed(tensor_attr("index_tensor")),
                 "self": NotKept("take's backward needs only the input's shape, which gradviz "
                                 "keeps (grad_fn.shape) instead of the tensor")})


@declare(method=True)
def take(input, index):
    """The entries of ``input`` at the flat positions ``index`` (negative ones count from the
    end), shaped like ``index``."""
    if not isinstance(index, Tensor) or index.dtype is not _dtypes.int64:
        raise RuntimeError("take(): Expected a long tensor for index, but got "
                           f"{TYPE_WORDS[index.dtype.name] if isinstance(index, Tensor) else type(index).__name__}")
    size = input.numel()
    positions = index._data.astype(np.int64)
    bad = positions[(positions >= size) | (positions < -size)]
    if bad.size:
        raise IndexError(f"out of range: tried to access index {int(bad.reshape(-1)[0])} on a "
                         f"tensor of {size} elements.")
    return apply(TAKE, input, index=np.where(positions < 0, positions + size, positions),
                 shape=tuple(input.shape), index_tensor=index)


# ---- rot90 ------------------------------------------------------------------------------------------

def _rot90_forward(a, k, dims, k_arg=None, dims_arg=None):
    return np.rot90(a, k, dims).copy()


ROT90 = Op("rot90", "Rot90Backward0", forward=_rot90_forward,
           backward=lambda ctx, g: (apply(ROT90, g, k=-ctx.k, dims=ctx.dims),),
           saved={"dims": passed("dims", many=True), "k": passed("k")})


@declare(method=True)
def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane ``dims``, from the first dim toward the
    second."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    first, second = _wrap_dim(dims[0], input.ndim), _wrap_dim(dims[1], input.ndim)
    if first == second:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {first} and "
                           f"dim1 = {second}")
    return apply(ROT90, input, k=int(k) % 4, dims=(first, second), k_arg=int(k),
                 dims_arg=tuple(dims))  # Note [Saved ints as passed]


# ---- unflatten, block_diag, cartesian_prod ----------------------------------------------------------

@declare(method=True)
def unflatten(input, dim, sizes):
    """Dim ``dim`` viewed as the dims ``sizes`` (one may be -1)."""
    dim = _wrap_dim(dim, input.ndim)
    if sizes is not None and not isinstance(sizes, (tuple, list)):
        raise TypeError(f"unflatten(): argument 'sizes' must be tuple of ints, not "
                        f"{type(sizes).__name__}")
    sizes = [] if sizes is None else list(_shape_arg(tuple(sizes)))
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    size = input.shape[dim]
    known = 1
    for s in sizes:
        if s != -1:
            known *= s
    if sizes.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if -1 in sizes:
        if known == 0 or size % known:
            raise RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size "
                               f"of dim {dim} ({size}) in the input tensor")
        sizes[sizes.index(-1)] = size // known
    elif known != size:
        raise RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size of "
                           f"dim {dim} ({size}) in the input tensor")
    shape = tuple(input.shape[:dim]) + tuple(sizes) + tuple(input.shape[dim + 1:])
    return view(input, shape)


def _block_diag_forward(*arrays, shapes):
    blocks = [np.asarray(a).reshape((1, -1) if np.ndim(a) == 1 else (1, 1) if np.ndim(a) == 0
                                    else np.shape(a)) for a in arrays]
    rows = sum(b.shape[0] for b in blocks)
    columns = sum(b.shape[1] for b in blocks)
    out = np.zeros((rows, columns), dtype=np.result_type(*blocks) if blocks else np.float32)
    r = c = 0
    for b in blocks:
        out[r:r + b.shape[0], c:c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    return out


def _block_diag_backward(ctx, g):
    grads, r, c = [], 0, 0
    for shape, needed in zip(ctx.shapes, ctx.needs_input_grad):
        rows, columns = (1, shape[0]) if len(shape) == 1 else shape if shape else (1, 1)
        if needed:
            block = narrow(narrow(g, 0, r, rows), 1, c, columns)
            grads.append(reshape(block, shape))
        else:
            grads.append(None)
        r, c = r + rows, c + columns
    return tuple(grads)


BLOCK_DIAG = Op("block_diag", "BlockDiagBackward0", forward=_block_diag_forward,
                backward=_block_diag_backward, dtype=promote)


@declare()
def block_diag(*tensors):
    """A matrix with the given matrices (1-D: rows; 0-d: 1x1) along its diagonal, zeros
    elsewhere."""
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. "
                               f"Input {i} has {t.ndim} dimensions")
    if not tensors:
        return _wrap(np.zeros((1, 0), dtype=_dtypes.get_default_dtype().numpy))
    return apply(BLOCK_DIAG, *tensors, shapes=tuple(tuple(t.shape) for t in tensors))


@declare()
def cartesian_prod(*tensors):
    """Every combination of one entry from each 1-D tensor, one row each (``meshgrid``
    flattened and stacked, as PyTorch composes it)."""
    for t in tensors:
        if t.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([reshape(g, (-1,)) for g in grids], 1)


# ---- small conveniences ------------------------------------------------------------------------------

@declare(method=True)
def msort(input):
    """``input`` sorted along dim 0 (the values of ``sort(input, 0)``)."""
    return sort(input, 0).values


@declare()
def atleast_3d(tensor):
    """``tensor`` with at least 3 dims: 0-d as (1, 1, 1), 1-D (n) as (1, n, 1), 2-D (m, n) as
    (m, n, 1)."""
    if tensor.ndim == 0:
        return reshape(tensor, (1, 1, 1))
    if tensor.ndim == 1:
        return unsqueeze(unsqueeze(tensor, 0), -1)
    if tensor.ndim == 2:
        return unsqueeze(tensor, -1)
    return tensor


@declare()
def dstack(tensors):
    """Concatenate along dim 2 after ``atleast_3d``."""
    return cat([atleast_3d(t) for t in tensors], 2)


@declare()
def row_stack(tensors):
    """``vstack`` under its old name."""
    return vstack(tensors)


@declare(method=True)
def argwhere(input):
    """The indices of the nonzero entries, one row each (``nonzero``)."""
    return nonzero(input)


# ---- more conveniences -----------------------------------------------------------------------------

@declare(method=True)
def fliplr(input):
    """``input`` flipped left to right (dim 1)."""
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, [1])


@declare(method=True)
def flipud(input):
    """``input`` flipped upside down (dim 0)."""
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, [0])


@declare(method=True)
def diagflat(input, offset=0):
    """The flattened ``input`` on the ``offset`` diagonal of a square matrix."""
    return apply(DIAG_EMBED, reshape(input, (-1,)), offset=int(offset), dim1=0, dim2=1)


@declare()
def combinations(input, r=2, with_replacement=False):
    """Every length-``r`` combination of the entries of a 1-D tensor, one row each (as
    ``itertools.combinations``), stacked as PyTorch composes it."""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return _wrap(np.zeros(0, dtype=input._data.dtype))
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = np.asarray(list(pick(range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    if rows.shape[0] == 0:
        return _wrap(np.zeros((0, r) if r > 1 else (0,), dtype=input._data.dtype))
    columns = [index_select(input, 0, _wrap(np.ascontiguousarray(rows[:, j]))) for j in range(r)]
    return stack(columns, 1)


@declare(name=False, method=True)
def sum_to_size(input, *size):
    """``input`` summed down to ``size`` (which must broadcast to ``input``'s shape)."""
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    try:
        if np.broadcast_shapes(size, tuple(input.shape)) != tuple(input.shape):
            raise ValueError
    except ValueError:
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size "
                           f"{{{list(input.shape)}}}.") from None
    lead = input.ndim - len(size)
    dims = list(range(lead)) + [lead + i for i, n in enumerate(size)
                                if n == 1 and input.shape[lead + i] != 1]
    if not dims:
        return input
    out = _sum(input, dims, keepdim=True)
    return view(out, size) if lead else out


def _narrow_copy_backward(ctx, g):
    return (_index_backward(g, ctx.shape, ctx.key, "slice"),)


NARROW_COPY = Op("narrow_copy", "NarrowCopyBackward0",
                 forward=lambda a, key, shape, **_: a[key].copy(), backward=_narrow_copy_backward,
                 saved={"dim": passed("dim"), "start": passed("start"), "length": Attr("length"),
                        "self_sym_sizes": Attr("shape")})


@declare(method=True)
def narrow_copy(input, dim, start, length):
    """``narrow`` as a copy, not a view."""
    view_of = narrow(input, dim, start, length)  # checks the arguments as narrow does
    dim_arg, start_arg = dim, start
    dim = _wrap_dim(dim, input.ndim)
    start = start + input.shape[dim] if start < 0 else start
    key = (slice(None),) * dim + (slice(start, start + length),)
    del view_of
    return apply(NARROW_COPY, input, key=key, shape=tuple(input.shape), dim=dim, dim_arg=dim_arg,
                 start=start, start_arg=start_arg, length=length)  # Note [Saved ints as passed]


@declare(name=False, method=True)
def split_with_sizes(input, split_sizes, dim=0):
    """``split`` with a list of sizes (``SplitWithSizesBackward0``)."""
    return split(input, list(split_sizes), dim)


@declare()
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoid-rule integral of ``y`` along ``dim`` (one entry shorter)."""
    dim = _wrap_dim(dim, y.ndim)
    length = y.shape[dim]
    pairs = narrow(y, dim, 1, max(length - 1, 0)) + narrow(y, dim, 0, max(length - 1, 0))
    if x is not None:
        spacing = diff(x, dim=-1 if x.ndim == 1 else dim)
        if x.ndim == 1:
            shape = [1] * y.ndim
            shape[dim] = -1
            spacing = spacing.reshape(shape)
        return apply(DIV_NUMBER, cumsum(spacing * pairs, dim), other=2.0)
    return cumsum(pairs * ((1.0 if dx is None else dx) / 2.0), dim)


@declare()
def vander(x, N=None, increasing=False):  # noqa: N803  (torch's name)
    """The Vandermonde matrix of the 1-D ``x``: columns ``x**(N-1), ..., x, 1`` (reversed with
    ``increasing=True``)."""
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else int(N)
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    if not x.dtype.is_floating_point:
        x = x.to(_dtypes.int64)
    if n == 0:
        return _wrap(np.zeros((x.shape[0], 0), dtype=x._data.dtype))
    columns = [ones(x.shape[0], 1, dtype=x.dtype)]
    if n > 1:
        columns.append(cumprod(expand(unsqueeze(x, 1), x.shape[0], n - 1), 1))
    result = cat(columns, 1)
    return result if increasing else flip(result, [1])


@declare()
def unravel_index(indices, shape):
    """The coordinates in a tensor of ``shape`` of the flat ``indices``: one tensor per dim."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    data = indices._data if isinstance(indices, Tensor) else np.asarray(indices)
    if isinstance(indices, Tensor) and indices.dtype.is_floating_point:
        raise TypeError("expected 'indices' to be integer dtype, but got torch.float32")
    total = int(np.prod(shape, dtype=np.int64))
    if data.size and (data.max() >= total or data.min() < -total):
        raise RuntimeError(f"'indices' must be in range [-{total}, {total - 1}]")
    coordinates = np.unravel_index(np.where(data < 0, data + total, data), shape)
    return tuple(_wrap(np.asarray(c, dtype=np.int64)) for c in coordinates)


__all__ = exports(globals())
