"""Shape ops and basic indexing. Most outputs are views: they share storage and the
version counter with their input, as in PyTorch."""

from __future__ import annotations

import builtins
import operator
import warnings

import numpy as np

from .. import _memory_format
from .. import dtypes as _dtypes
from .._tensor import Tensor, _describe, _int_arg, _warn_once, _wrap_dim
from ._registry import Op, apply, check_saveable, declare, exports, numpy_names, promote
from ._saved import (
    DIM,
    DIMS,
    SELF_SIZES,
    Attr,
    Computed,
    indices_tuple,
    key_dim,
    passed,
    select_index,
    shape_attr,
    slice_part,
)
from ._scatter_add import add_at


def _shape_arg(args):
    """Accept ``f(2, 3)`` and ``f((2, 3))``, like PyTorch: integers (Python, numpy, 0-d integer
    tensors), never a float (``zeros(n / 2)`` is torch's TypeError, not a truncated size)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    for size in args:  # Python ints (the common call) are the sizes as they are
        if type(size) is not int:
            break
    else:
        return tuple(args)
    sizes = []
    for position, size in enumerate(args):
        try:
            if position == 0 and isinstance(size, (bool, np.bool_)):  # torch's parser refuses a
                raise TypeError  # bool first size (zeros(True)) and reads a later one as 0 or 1
            sizes.append(operator.index(size))
        except TypeError:
            raise TypeError(f"argument 'size' must be tuple of ints, but found element of type "
                            f"{type(size).__name__} at pos {position}") from None
    return tuple(sizes)


def _infer_shape(shape, numel):
    if -1 not in shape:  # the sizes given: valid when none is negative and they hold numel
        known = 1
        for s in shape:
            if s < 0:
                break
            known *= s
        else:
            if known == numel:
                return shape
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for i, s in enumerate(shape):
        if s != -1:
            if s < 0:
                raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape {list(shape)}")
            known *= s
    if unknown:
        if known == 0 and numel == 0:
            raise RuntimeError(f"cannot reshape tensor of 0 elements into shape {list(shape)} "
                               "because the unspecified dimension size -1 can be any value and "
                               "is ambiguous")
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
    # an array's own method: np.reshape's Python dispatch costs four times the reshape
    source = ctx.attrs["source"]
    return (g.reshape(source) if type(g) is np.ndarray else np.reshape(g, source),)


VIEW = Op("view", "ViewBackward0", forward=_view_forward,
          backward=lambda ctx, g: (reshape(g, ctx.source),),
          fast_backward=_reshape_to_source_fast, view=True, saved={"self_sym_sizes": shape_attr("source")})
RESHAPE_ALIAS = Op("reshape_alias", "ReshapeAliasBackward0", forward=_view_forward,
                   backward=lambda ctx, g: (reshape(g, ctx.source),),
                   fast_backward=_reshape_to_source_fast, view=True,
                   saved={"self_sym_sizes": shape_attr("source")})
UNSAFE_VIEW = Op("unsafe_view", "UnsafeViewBackward0",
                 forward=lambda a, shape, source: a.reshape(shape),
                 backward=lambda ctx, g: (reshape(g, ctx.source),),
                 fast_backward=_reshape_to_source_fast, saved={"self_sym_sizes": shape_attr("source")})


def unsafe_view(input, *shape):
    """A reshape recorded as ``UnsafeViewBackward0`` (the output is not tracked as a view)."""
    shape = _infer_shape(_shape_arg(shape), input._data.size)
    return apply(UNSAFE_VIEW, input, shape=shape, source=input._data.shape)


@declare(name=False, method=True)
def view(input, *shape):
    if len(shape) == 1 and isinstance(shape[0], _dtypes.dtype):
        raise TypeError(f"view({shape[0]}) reinterprets the bits of a tensor as another dtype, which gradviz "
                        f"does not do: convert the values with .to({shape[0]}), or view the bits in numpy "
                        "(x.numpy().view(...))")
    shape = _infer_shape(_shape_arg(shape), input._data.size)
    return apply(VIEW, input, shape=shape, source=input._data.shape)


def _reshapes_as_view(shape, strides, new_shape):
    """Whether a nonempty array of ``shape`` and ``strides`` takes ``new_shape`` (same size)
    as a view: numpy's test (``_attempt_nocopy_reshape``, C order; PyTorch's
    ``computeStride`` is the same), without numpy's exception when it cannot (Note [Reshape
    without a probe])."""
    old = [(size, stride) for size, stride in zip(shape, strides) if size != 1]
    new_ndim, old_ndim = len(new_shape), len(old)
    new_start = old_start = 0
    while new_start < new_ndim and old_start < old_ndim:
        new_end, old_end = new_start + 1, old_start + 1
        new_size, old_size = new_shape[new_start], old[old_start][0]
        while new_size != old_size:  # the shortest runs of axes of one size in both shapes
            if new_size < old_size:
                new_size *= new_shape[new_end]
                new_end += 1
            else:
                old_size *= old[old_end][0]
                old_end += 1
        for k in range(old_start, old_end - 1):  # the old run must be one row-major block
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return False
        new_start, old_start = new_end, old_end
    return True


# Note [Reshape without a probe]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``reshape`` asked numpy whether the new shape is a view by setting it on a probe view; where
# it is not (a transposed or strided input: the attention's ``matmul`` reshapes two of its
# three operands that way), numpy raises, at 11 us a call, as much as the copy that follows.
# ``_reshapes_as_view`` answers the same question from the shape and strides (checked
# against numpy's probe in tests/ops/test_reshape_view.py); an empty array still asks numpy.
# The copy is row-major, as PyTorch's ``clone(memory_format=contiguous_format)`` there, so
# that the unsafe view takes its shape without a second copy (the input's own layout,
# ``clone``'s default, made numpy copy again). On the GPT's (16, 4, 32, 16) attention
# operands a copying reshape took 34-38 us and takes 18-19 (numpy's copy alone: 10); the
# attention's `q @ k.transpose(-2, -1)` took 151 us and takes 104 (torch: 60).

@declare(method=True)
def reshape(input, *shape):
    """A view when the layout allows it, else a copy (like PyTorch)."""
    return reshape_to(input, _infer_shape(_shape_arg(shape), input._data.size))


def reshape_to(input, shape):
    """``reshape`` to ``shape``, a tuple of sizes already checked against the input's size
    (no ``-1``): the callers that computed it skip the argument parsing."""
    data = input._data
    if data.flags.c_contiguous:
        viewable = True
    elif data.size:
        viewable = _reshapes_as_view(data.shape, data.strides, shape)
    else:
        probe = data.view()
        try:
            probe.shape = shape
            viewable = True
        except AttributeError:
            viewable = False
    if not viewable:  # a row-major copy, viewed (Note [Reshape without a probe])
        return unsafe_view(apply(CLONE, input, layout=_memory_format.contiguous_format), *shape)
    op = VIEW if data.flags.c_contiguous else RESHAPE_ALIAS  # PyTorch's two view paths
    return apply(op, input, shape=shape, source=data.shape)


@declare(method=True)
def flatten(input, start_dim=0, end_dim=-1):
    """``input`` with the dimensions ``start_dim`` to ``end_dim`` merged into one.

    Mirrors ``torch.flatten``."""
    if input.ndim == 0:
        return reshape(input, 1)
    start = _wrap_dim(start_dim, input.ndim)
    end = _wrap_dim(end_dim, input.ndim)
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if start == end:
        return input  # nothing to merge: PyTorch returns the tensor itself, no view node
    shape = input._data.shape
    middle = 1
    for s in shape[start:end + 1]:
        middle *= s
    return reshape(input, shape[:start] + (middle,) + shape[end + 1:])


def _transpose_fast(ctx, g):
    if not g.ndim:
        return (g,)
    dim0, dim1 = ctx.attrs["dim0"], ctx.attrs["dim1"]
    # an array's own method: np.swapaxes's Python dispatch costs more than the view
    return (g.swapaxes(dim0, dim1) if type(g) is np.ndarray else np.swapaxes(g, dim0, dim1),)


TRANSPOSE = Op("transpose", "TransposeBackward0",
               forward=lambda a, dim0, dim1, dim0_arg=None, dim1_arg=None: (
                   a.swapaxes(dim0, dim1) if a.ndim else a.view()),
               backward=lambda ctx, g: (transpose(g, ctx.dim0, ctx.dim1),),
               fast_backward=_transpose_fast,
               view=True, saved={"dim0": passed("dim0"), "dim1": passed("dim1")})
T = Op("t", "TBackward0", forward=lambda a: a.T, backward=lambda ctx, g: (t(g),),
       fast_backward=lambda ctx, g: (g.T,), view=True, saved={})
PERMUTE = Op("permute", "PermuteBackward0",
             forward=lambda a, dims, inverse, dims_arg=None: a.transpose(dims),
             backward=lambda ctx, g: (permute(g, *ctx.inverse),),
             fast_backward=lambda ctx, g: (np.transpose(g, ctx.attrs["inverse"]),), view=True,
             saved={"dims": DIMS})


def _inverse_permutation(dims, ndim):
    """The order that undoes ``dims`` (``ndim`` dims in range), or None if a dim repeats (a
    few ints: a Python loop is quicker than numpy's argsort and its dispatch)."""
    inverse = [-1] * ndim
    for position, dim in enumerate(dims):
        if inverse[dim] != -1:
            return None
        inverse[dim] = position
    return tuple(inverse)


@declare(method=True)
def transpose(input, dim0, dim1):
    """A view of ``input`` with dimensions ``dim0`` and ``dim1`` swapped.

    Mirrors ``torch.transpose``."""
    ndim = input.ndim
    return apply(TRANSPOSE, input, dim0=_wrap_dim(dim0, ndim), dim1=_wrap_dim(dim1, ndim),
                 dim0_arg=dim0, dim1_arg=dim1)  # Note [Saved ints as passed]


@declare(method=True)
def t(input):
    """Transpose a tensor of at most 2 dimensions."""
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return apply(T, input)


@declare(method=True)
def permute(input, *dims):
    """A view of ``input`` with its dimensions reordered as ``dims``. Mirrors ``torch.permute``."""
    ndim = input.ndim
    dims = _shape_arg(dims)
    if len(dims) != ndim:  # torch checks the count before the dims themselves
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
            f"length of the desired ordering of dimensions i.e. input.dim() = {ndim} is "
            f"not equal to len(dims) = {len(dims)}")
    dims_arg, dims = dims, tuple([_wrap_dim(d, ndim) for d in dims])
    inverse = _inverse_permutation(dims, ndim)
    if inverse is None:
        raise RuntimeError(f"permute(): duplicate dims are not allowed, got {list(dims)}")
    return apply(PERMUTE, input, dims=dims, inverse=inverse, dims_arg=dims_arg)


_T_OF_0D_WARNING = ("Tensor.T is deprecated on 0-D tensors. This function is the identity in "
                    "these cases.")
_T_NOT_2D_WARNING = (
    "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is deprecated "
    "and it will throw an error in a future release. Consider `x.mT` to transpose batches of "
    "matrices or `x.permute(*torch.arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a "
    "tensor.")


def reversed_dims(input):
    """``x.T``: the dims in reverse order. Like PyTorch, warns (once per process) when ``x``
    is not 2-D, where ``x.mT`` or ``x.permute`` says what is meant."""
    ndim = input.ndim
    if ndim != 2:
        _warn_once("T of 0-d" if ndim == 0 else "T not 2-d",
                   _T_OF_0D_WARNING if ndim == 0 else _T_NOT_2D_WARNING)
    dims = tuple(range(ndim - 1, -1, -1))  # its own inverse
    return apply(PERMUTE, input, dims=dims, inverse=dims)


UNSQUEEZE = Op("unsqueeze", "UnsqueezeBackward0",
               forward=lambda a, dim, dim_arg=None: a.reshape(a.shape[:dim] + (1,) + a.shape[dim:]),  # expand_dims
               backward=lambda ctx, g: (squeeze_dim(g, ctx.dim),),
               fast_backward=lambda ctx, g: (np.squeeze(g, ctx.attrs["dim"]),), view=True, saved={"dim": DIM})
def _reshape_to_shape_fast(ctx, g):
    return (np.reshape(g, ctx.attrs["shape"]),)


def _squeeze_dim_op(name, node, saved=None):
    return Op(name, node,
              forward=lambda a, dim, shape, dim_arg=None: (
                  np.squeeze(a, dim) if a.ndim and a.shape[dim] == 1 else a.view()),
              backward=lambda ctx, g: (reshape(g, ctx.shape),),
              fast_backward=_reshape_to_shape_fast, view=True, saved=saved)


SQUEEZE_DIM = _squeeze_dim_op("squeeze_dim", "SqueezeBackward1",
                              saved={"dim": DIM, "self_sym_sizes": SELF_SIZES})
# the in-place squeeze_(dim) PyTorch's matmul uses for a vector times a matrix
SQUEEZE_DIM_INPLACE = _squeeze_dim_op("squeeze_dim_", "SqueezeBackward4",
                                      saved={"dim": DIM, "self_sym_sizes": SELF_SIZES})
SQUEEZE_DIMS = Op("squeeze_dims", "SqueezeBackward2",
                  forward=lambda a, dims, shape, dims_arg=None: (
                      np.squeeze(a, tuple(d for d in dims if a.shape[d] == 1))),
                  backward=lambda ctx, g: (reshape(g, ctx.shape),),
                  fast_backward=_reshape_to_shape_fast, view=True,
                  saved={"dim": DIMS, "self_sym_sizes": SELF_SIZES})
SQUEEZE = Op("squeeze", "SqueezeBackward0",
             forward=lambda a, shape: np.squeeze(a),
             backward=lambda ctx, g: (reshape(g, ctx.shape),),
             fast_backward=_reshape_to_shape_fast, view=True, saved={"self_sym_sizes": SELF_SIZES})


@declare(method=True)
@numpy_names
def unsqueeze(input, dim):
    """A view of ``input`` with a dimension of size 1 inserted at ``dim``.

    Mirrors ``torch.unsqueeze``."""
    return apply(UNSQUEEZE, input, dim=_wrap_dim(dim, input.ndim + 1), dim_arg=dim)


def squeeze_dim(input, dim, node="SqueezeBackward1"):
    op = SQUEEZE_DIM if node == "SqueezeBackward1" else SQUEEZE_DIM_INPLACE
    return apply(op, input, dim=_wrap_dim(dim, input.ndim), shape=input._data.shape, dim_arg=dim)


def check_distinct_dims(dims: tuple) -> tuple:
    """``dims`` (wrapped), or torch's error naming the first dim listed twice."""
    if len(set(dims)) != len(dims):
        twice = next(d for d in dims if dims.count(d) > 1)
        raise RuntimeError(f"dim {twice} appears multiple times in the list of dims")
    return dims


@declare(method=True)
@numpy_names
def squeeze(input, dim=None):
    """Remove dims of size 1: all of them, ``dim`` alone, or those in a tuple of dims (a dim
    of another size is kept, as in PyTorch)."""
    if isinstance(dim, (tuple, list)):
        dims = check_distinct_dims(tuple(_wrap_dim(d, input.ndim) for d in dim) if input.ndim else ())
        return apply(SQUEEZE_DIMS, input, dims=dims, shape=input._data.shape, dims_arg=tuple(dim))
    if dim is not None:
        return squeeze_dim(input, dim)
    return apply(SQUEEZE, input, shape=input._data.shape)


def _expand_backward(ctx, g):
    from ._reduction import sum_to

    return (sum_to(g, ctx.source),)


def _expand_fast(ctx, g):
    from ._reduction import sum_to_array

    return (sum_to_array(g, ctx.attrs["source"]),)


def _expand_forward(a, shape, source):
    if type(a) is np.ndarray and shape == a.shape and a.size and 1 not in shape:
        # a no-op (matmul's batches): np.broadcast_to's read-only view, same shape and strides,
        # without its iterator (a size of 1 would take a stride of 0 there)
        out = a.view()
        out.flags.writeable = False
        return out
    return np.broadcast_to(a, shape)


EXPAND = Op("expand", "ExpandBackward0",
            forward=_expand_forward,
            backward=_expand_backward, fast_backward=_expand_fast, view=True,
            saved={"self_sym_sizes": shape_attr("source")})


@declare(method=True)
def expand(input, *sizes):
    """Broadcast to ``sizes`` without copying (``-1`` keeps a dimension)."""
    sizes = _shape_arg(sizes)
    source = input._data.shape
    target = expand_target(input, sizes)
    return apply(EXPAND, input, shape=target, source=source)  # recorded even when a no-op, as in torch


def expand_to(input, shape):
    """``expand`` to ``shape``, a tuple of sizes ``input`` is known to broadcast to (no
    ``-1``): the callers that computed it skip the argument parsing and the checks."""
    return apply(EXPAND, input, shape=shape, source=input._data.shape)


def view_to(input, shape):
    """``view`` to ``shape``, a tuple of sizes whose product is the input's size (no ``-1``)."""
    return apply(VIEW, input, shape=shape, source=input._data.shape)


def unsafe_view_to(input, shape):
    """``unsafe_view`` to ``shape``, a tuple of sizes whose product is the input's size."""
    return apply(UNSAFE_VIEW, input, shape=shape, source=input._data.shape)


def expand_target(input, sizes):
    """The shape ``input`` expands to for ``sizes`` (``-1`` keeps a dim), or PyTorch's error."""
    source = input._data.shape
    if len(sizes) < len(source):
        type_name = _describe(input)[1:].split(" ")[0]  # gradviz.FloatTensor
        raise RuntimeError(
            f"expand({type_name}{{{list(source)}}}, size={list(sizes)}): the number of sizes "
            f"provided ({len(sizes)}) must be greater or equal to the number of dimensions in "
            f"the tensor ({len(source)})"
        )
    lead = len(sizes) - len(source)
    target = list(sizes)
    for i in range(lead):
        if target[i] == -1:
            raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a leading, "
                               f"non-existing dimension {i}")
    for i, size in enumerate(source):
        if target[lead + i] == -1:
            target[lead + i] = size
        elif size != 1 and size != target[lead + i]:
            raise RuntimeError(
                f"The expanded size of the tensor ({target[lead + i]}) must match the existing "
                f"size ({size}) at non-singleton dimension {lead + i}.  Target sizes: "
                f"{list(sizes)}.  Tensor sizes: {list(source)}"
            )
    if any(size < 0 for size in target):
        # torch's words: its size product overflows
        raise RuntimeError(f"numel: integer multiplication overflow (a negative size in {list(sizes)}: "
                           "only -1 keeps a dimension's size)")
    return tuple(target)


def _clone_forward(a, layout=None):
    # torch's default is preserve_format: a dense input's axis order is kept (a transposed
    # tensor's clone is transposed too)
    return _memory_format.preserved_copy(a) if layout is None else _memory_format.relayout(a, layout)


CLONE = Op("clone", "CloneBackward0", forward=_clone_forward, backward=lambda ctx, g: (g,),
           fast_backward=lambda ctx, g: (g,), saved={})


@declare(method=True)
def clone(input, *, memory_format=None):
    """A copy of ``input`` that stays in the graph (its gradient flows back to ``input``), in
    ``input``'s own layout unless ``memory_format`` says (``preserve_format``, as torch: Note
    [Memory formats] in ``gradviz/_memory_format.py``).

    Mirrors ``torch.clone``."""
    if memory_format is None:
        return apply(CLONE, input)
    return apply(CLONE, input, layout=_memory_format.check(memory_format, "clone"))


@declare(name=False, method=True)
def contiguous(input, memory_format=_memory_format.contiguous_format):
    """``input`` if its memory already has ``memory_format``'s layout (row-major by default),
    else a copy in that layout (``CloneBackward0``)."""
    memory_format = _memory_format.check(memory_format, "contiguous")
    if _memory_format.is_laid_out(input._data, memory_format):
        return input
    if memory_format is _memory_format.preserve_format:  # checked only where a copy is needed, as torch
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    return apply(CLONE, input, layout=memory_format)


# ---- indexing ---------------------------------------------------------------------------

def _scatter_forward(g, shape, key, kind):
    out = np.zeros(shape, dtype=g.dtype)
    if kind == "advanced":  # repeated indices must add up
        add_at(out, key, g)
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


def _index_forward(a, key, kind, shape, dim_arg=None):
    if kind != "advanced":
        return a[key + (Ellipsis,)]  # the trailing ... keeps a 0-d result a view, not a scalar
    if type(key) is np.ndarray and key.dtype.kind == "i" and a.ndim:
        return a.take(key, axis=0)  # Note [Rows by an index tensor]
    return a[key]


def _make_index_op(name, node, is_view, saved=None):
    return Op(name, node, forward=_index_forward, view=is_view,
              backward=lambda ctx, g: (_index_backward(g, ctx.shape, ctx.key, ctx.kind),),
              saved=saved)


_SELECT = _make_index_op("select", "SelectBackward0", True,
                         saved={"dim": Computed(key_dim), "index": Computed(select_index),
                             "self_sym_sizes": SELF_SIZES})
_SLICE = _make_index_op("slice", "SliceBackward0", True,
                        saved={"dim": Computed(key_dim), "start": Computed(slice_part("start")),
                            "end": Computed(slice_part("end")), "step": Computed(slice_part("step")),
                            "self_sym_sizes": SELF_SIZES})
_ADVANCED = _make_index_op("index", "IndexBackward0", False,
                           saved={"indices": Computed(indices_tuple), "self_sym_sizes": SELF_SIZES})
_INDEX_OPS = {"select": _SELECT, "slice": _SLICE, "advanced": _ADVANCED}


def _index_op(input, key, kind, dim_arg=None):
    """The indexing node for ``key``; ``dim_arg``: the dim as passed to ``select``/``narrow``
    (Note [Saved ints as passed]), which plain indexing has none of."""
    if dim_arg is None:
        return apply(_INDEX_OPS[kind], input, key=key, kind=kind, shape=input._data.shape)
    return apply(_INDEX_OPS[kind], input, key=key, kind=kind, shape=input._data.shape, dim_arg=dim_arg)


def _is_advanced(item):
    return isinstance(item, (Tensor, np.ndarray, list, bool, np.bool_))


def _as_index(item):
    if isinstance(item, Tensor) and item.dtype is _dtypes.uint8:
        warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                      "torch.bool instead.", UserWarning, stacklevel=4)
    return _index_data(item)


_INDEX_DTYPES = frozenset({"int64", "int32", "uint8", "bool"})  # torch's long, int, byte, bool


def _index_data(item):
    if isinstance(item, Tensor):
        if item.dtype.name not in _INDEX_DTYPES:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if item.dtype is _dtypes.uint8:  # a byte tensor is a mask, as before torch had bool
            return item._data.astype(bool)
        return item._data
    if isinstance(item, list):
        array = np.asarray(item)
        return array.astype(np.int64) if array.size == 0 else array  # x[[]]: no rows
    return item


def _covers_dim(item, size):
    """Whether ``item`` is PyTorch's no-op slice: start 0 (or None), step 1, stop past the end."""
    return (item.start in (None, 0) and item.step in (None, 1)
            and (item.stop is None or item.stop >= size))


def check_slice_steps(items):
    """PyTorch's slices only step forward: a negative step is a ValueError, as in PyTorch
    (numpy would reverse)."""
    for item in items:
        if isinstance(item, slice) and item.step is not None:
            step = operator.index(item.step)
            if step == 0:
                raise ValueError("slice step cannot be zero")
            if step < 0:
                raise ValueError(
                    f"step must be greater than zero, got {step}: tensors cannot be sliced "
                    f"backwards; use torch.flip(x, dims) to reverse a dim")


def sequence_as_tuple(key):
    """``key``, or the tuple of its items where PyTorch reads a list key as one (as numpy did
    before 1.23): a list of fewer than 32 items holding a sequence, a tensor, a slice, ``...``
    or ``None``. ``x[[[0, 1], [1, 0]]]`` is ``x[[0, 1], [1, 0]]``, not an index of shape
    (2, 2)."""
    if type(key) is list and len(key) < 32 and any(
            isinstance(item, (list, tuple, Tensor, slice, np.ndarray, str)) or item is Ellipsis or item is None
            for item in key):
        return tuple(key)
    return key


def scalar_tensor_keys(key):
    """``key`` with each 0-d integer tensor replaced by its Python int: PyTorch's indexing
    selects with it (``x[torch.tensor(1)]`` is the view ``x[1]``, ``SelectBackward0``). A 0-d
    bool or uint8 tensor stays a mask."""
    items = key if isinstance(key, tuple) else (key,)
    if not any(isinstance(item, Tensor) and item.ndim == 0 for item in items):
        return key
    converted = tuple(
        int(item._data) if isinstance(item, Tensor) and item.ndim == 0
        and item._data.dtype.kind in "iu" and item._data.dtype != np.uint8 else item
        for item in items)
    return converted if isinstance(key, tuple) else converted[0]


# ``x[...]`` and ``x[()]``: the whole tensor as a new view, which PyTorch records as an alias
ALIAS = Op("alias", "AliasBackward0", forward=lambda a: a.view(), backward=lambda ctx, g: (g,),
           view=True)


def _index_array(item):
    if isinstance(item, (bool, np.bool_)):
        return None
    return np.asarray(_index_data(item))


def check_advanced_key(shape, items):
    """PyTorch's errors for tensor / list indices, before numpy sees the key (numpy says
    "axis" and words its mask and broadcast errors differently)."""
    arrays = [None if item is None or item is Ellipsis or not _is_advanced(item) else _index_array(item)
              for item in items]
    consumed = sum(0 if item is None or item is Ellipsis or isinstance(item, (bool, np.bool_))
                   else (array.ndim if array is not None and array.dtype == np.bool_ else 1)
                   for item, array in zip(items, arrays))
    if consumed > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    dim = 0
    index_shapes = []
    for item, array in zip(items, arrays):
        if item is None or isinstance(item, (bool, np.bool_)):
            continue
        if item is Ellipsis:
            dim += max(len(shape) - consumed, 0)
            continue
        if array is None:  # an int or a slice
            dim += 1
            continue
        if array.dtype == np.bool_:
            for i, size in enumerate(array.shape):
                if dim + i < len(shape) and size != shape[dim + i]:
                    raise IndexError(
                        f"The shape of the mask {list(array.shape)} at index {i} does not match the "
                        f"shape of the indexed tensor {list(shape)} at index {dim + i}")
            dim += array.ndim
            continue
        if dim < len(shape) and array.size:
            size = shape[dim]
            bad = array[(array >= size) | (array < -size)]
            if bad.size:
                raise IndexError(f"index {bad.flat[0]} is out of bounds for dimension {dim} with size {size}")
        index_shapes.append(array.shape)
        dim += 1
    try:
        np.broadcast_shapes(*index_shapes)
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes "
                         + ", ".join(str(list(s)) for s in index_shapes)) from None


# Note [Rows by an index tensor]
# ``C[idx]`` with one integer tensor of at least one dim (an embedding table looked up by a
# batch of token ids, ``Y[ix]`` for a minibatch) is the commonest advanced index; the general
# path's per-item checks took 20 of its 28 us. For it, the forward is ``take`` along the first
# dim, the same rows as numpy's fancy index in a third of the time, and ``take`` checks the
# bounds itself: an index out of bounds raises IndexError before anything is recorded, and
# the general path then raises PyTorch's error. A mask, a byte tensor (a mask too), an int8 or
# int16 tensor (PyTorch's error), an empty index or a 0-d input takes the general path.
def _row_index(input, key):
    """The array of ``key``, an integer tensor of 1+ dims, when ``input[key]`` is a lookup of
    rows (Note [Rows by an index tensor]); else None."""
    array = key._data
    if array.dtype.kind != "i" or array.dtype.itemsize < 4 or not array.size or not input.ndim:
        return None
    check_saveable(key, input)
    return array


def check_basic_key(shape, items):
    """PyTorch's errors for a key of ints, slices, None and Ellipsis that does not fit
    ``shape``: too many indices, or an int out of its dim's range (numpy says "axis" and
    "array"). The dim an error names counts the dims that None inserts, as PyTorch's does."""
    consumed = sum(1 for item in items if item is not None and item is not Ellipsis)
    if consumed > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    dim = axis = 0  # the dim named in the error counts the dims None inserts; axis does not
    for item in items:
        if item is Ellipsis:
            dim += len(shape) - consumed
            axis += len(shape) - consumed
        elif item is None:
            dim += 1
        else:
            if isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
                size = shape[axis]
                if not -size <= item < size:
                    raise IndexError(
                        f"index {item} is out of bounds for dimension {dim} with size {size}")
            dim += 1
            axis += 1


def in_range_ints(key, shape):
    """Whether ``key`` is a nonempty tuple of Python ints, one per leading dim of ``shape`` at
    most, each in that dim's range: an element or a sub-tensor, selected dim by dim."""
    if not key or len(key) > len(shape):
        return False
    return all(type(index) is int and -size <= index < size for size, index in zip(shape, key))


@declare(name=False, method="__getitem__")
def getitem(input, key):
    """``input[key]``: ints select, slices slice, ``None`` inserts a dim, ``...`` skips dims,
    and integer or boolean tensors index (advanced indexing, a copy). A key that keeps all of
    ``input`` (``...``, ``()``, ``(:,)``) gives an alias view, as in PyTorch."""
    if type(key) is int and input._data.ndim and -input._data.shape[0] <= key < input._data.shape[0]:
        return _index_op(input, (key,), "select")  # ``x[i]``: what the general path records
    if type(key) is tuple and in_range_ints(key, input._data.shape):
        out = input  # ``N[i, j]``: one select per int, each of the first dim left, as below
        for index in key:
            out = _index_op(out, (index,), "select")
        return out
    if type(key) is Tensor and key.ndim:  # ``emb[idx]``, ``Y[ix]``
        rows = _row_index(input, key)
        if rows is not None:
            try:
                return _index_op(input, rows, "advanced")
            except IndexError:
                pass  # an index out of bounds: the general path raises PyTorch's error
    lone_int = isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_))
    key = scalar_tensor_keys(sequence_as_tuple(key))
    items = key if isinstance(key, tuple) else (key,)
    check_slice_steps(items)
    if any(_is_advanced(item) for item in items):
        for item in items:
            if isinstance(item, Tensor):
                check_saveable(item, input)
        check_advanced_key(input._data.shape, items)
        np_key = tuple(_as_index(item) for item in items)
        np_key = np_key[0] if len(np_key) == 1 else np_key
        return _index_op(input, np_key, "advanced")
    for item in items:
        if isinstance(item, str):  # torch tries to make an index tensor of it: its TypeError
            raise TypeError(f"new(): invalid data type 'str' (an index of {item!r}): tensors are "
                            f"indexed by integers, slices, None, ... and integer or bool tensors")
        if not (item is None or item is Ellipsis or isinstance(item, (int, np.integer, slice))):
            raise IndexError(
                "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
                f"are valid indices (got {type(item).__name__})"
            )
    # Basic indexing decomposes into one select / slice / unsqueeze per item, as in PyTorch.
    consumed = sum(1 for item in items if item is not None and item is not Ellipsis)
    # a lone int (not a tuple of one, nor a 0-d tensor) is PyTorch's "invalid index" on a 0-d
    # tensor; anything else is "too many indices" (check_basic_key)
    if input.ndim == 0 and lone_int:
        raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                         "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
    check_basic_key(input._data.shape, items)  # too many indices, an int out of range
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
            full = (slice(None),) * dim + (int(item),)  # in range: check_basic_key
            out = _index_op(out, full, "select")
    if out is input:
        out = apply(ALIAS, input)
    return out


# ---- joining and splitting --------------------------------------------------------------

def _cat_forward(*arrays, dim, sizes, dim_arg=None):
    return np.concatenate(arrays, axis=dim)


def _cat_backward(ctx, g):
    grads = []
    start = 0
    for size, needed in zip(ctx.sizes, ctx.needs_input_grad):
        grads.append(narrow(g, ctx.dim, start, size) if needed else None)
        start += size
    return tuple(grads)


def _cat_fast(ctx, g):
    """``_cat_backward`` on the array: each input's gradient is a basic slice of ``g`` (a numpy
    view, as the Tensor rule's ``narrow``), without a view Tensor per piece (issue 17: a
    concatenation of 10,000 tensors made 10,000 tracked views in backward)."""
    attrs = ctx.attrs
    lead = (slice(None),) * attrs["dim"]
    grads = []
    start = 0
    for size, needed in zip(attrs["sizes"], ctx.needs_input_grad):
        grads.append(g[lead + (slice(start, start + size),)] if needed else None)
        start += size
    return tuple(grads)


CAT = Op("cat", "CatBackward0", forward=_cat_forward, backward=_cat_backward,
         fast_backward=_cat_fast, saved={"dim": DIM})


def _check_tensor_list(tensors, what):
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}(): expected a sequence of Tensors, but element {i} is "
                            f"{type(t).__name__}")


@declare(hidden=("concat", "concatenate"), out=True)
@numpy_names
def cat(tensors, dim=0):
    """Concatenate tensors along an existing ``dim`` (all other sizes must match); also
    ``torch.concat`` and ``torch.concatenate``."""
    from .. import dtypes as _dtypes

    if isinstance(tensors, Tensor):  # iterating it would cat its rows
        raise TypeError("cat(): argument 'tensors' must be tuple of Tensors, not Tensor; pass "
                        "a list: cat([a, b])")
    tensors = [t for t in tensors]
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    _check_tensor_list(tensors, "cat")
    arrays = [t._data for t in tensors]  # checked on the arrays: no Size or dtype objects
    for i, a in enumerate(arrays):
        if a.ndim == 0:
            raise RuntimeError(
                f"zero-dimensional tensor (at position {i}) cannot be concatenated: use "
                f"torch.stack to join 0-d tensors along a new dim, or reshape them to 1-D")
    # PyTorch skips legacy 1-D empty tensors
    kept = [i for i, a in enumerate(arrays) if not (a.ndim == 1 and a.shape[0] == 0)] or [0]
    parts = tensors if len(kept) == len(tensors) else [tensors[i] for i in kept]
    arrays = arrays if len(kept) == len(tensors) else [arrays[i] for i in kept]
    reference = arrays[0]
    ndim, shape, dtype = reference.ndim, reference.shape, reference.dtype
    dim_arg, dim = dim, _wrap_dim(dim, ndim)
    one_dtype = True
    for i, a in enumerate(arrays):
        if a.ndim != ndim:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {ndim} and {a.ndim}")
        if a.shape != shape:
            for d in range(ndim):
                if d != dim and a.shape[d] != shape[d]:
                    raise RuntimeError(
                        f"Sizes of tensors must match except in dimension {dim}. Expected size "
                        f"{shape[d]} but got size {a.shape[d]} for tensor number {i} in the list.")
        one_dtype = one_dtype and a.dtype == dtype
    if not one_dtype:
        common = _dtypes.result_type(*parts)
        parts = [t if t.dtype is common else t.to(common) for t in parts]
    return apply(CAT, *parts, dim=dim, sizes=tuple([a.shape[dim] for a in arrays]), dim_arg=dim_arg)


def _stack_backward(ctx, g):
    return tuple(select(g, ctx.dim, i) if needed else None
                 for i, needed in enumerate(ctx.needs_input_grad))


def _stack_fast(ctx, g):
    """``_stack_backward`` on the array: the select at ``i`` along dim for input ``i``, as
    numpy views made by iterating ``g`` with dim moved first (in C, one view per piece, with
    the shape and strides of ``g[..., i, ...]``)."""
    dim = ctx.attrs["dim"]
    pieces = g if dim == 0 else np.moveaxis(g, dim, 0)
    return tuple([piece if needed else None
                  for piece, needed in zip(pieces, ctx.needs_input_grad)])


# One node whose inputs are the stacked tensors themselves, as PyTorch's StackBackward0
# (not a CatBackward0 over one UnsqueezeBackward0 per input); its gradient for input i is
# the select at i along dim.
STACK = Op("stack", "StackBackward0", forward=lambda *arrays, dim, dim_arg=None: np.stack(arrays, axis=dim),
           backward=_stack_backward, fast_backward=_stack_fast, dtype=promote, saved={"dim": DIM})


@declare(out=True)
@numpy_names
def stack(tensors, dim=0):
    """Join tensors of equal shape along a new ``dim``.

    Examples
    --------
    >>> import gradviz as torch
    >>> a = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> torch.stack([a, 2 * a], dim=1)
    tensor([[1., 2.],
            [2., 4.]], grad_fn=<StackBackward0>)
    """
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    _check_tensor_list(tensors, "stack")
    shape = tensors[0]._data.shape
    for i, t in enumerate(tensors):
        if t._data.shape != shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(shape)} at entry 0 "
                f"and {list(t._data.shape)} at entry {i}")
    return apply(STACK, *tensors, dim=_wrap_dim(dim, len(shape) + 1), dim_arg=dim)


@declare(method=True)
@numpy_names
def narrow(input, dim, start, length):
    """The view ``input[..., start:start + length, ...]`` along ``dim``."""
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    start, length = _int_arg(start, "start"), _int_arg(length, "length")
    size = input._data.shape[dim]
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start < 0:
        start += size
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    key = (slice(None),) * dim + (slice(start, start + length),)
    return _index_op(input, key, "slice", dim_arg)


@declare(method=True)
@numpy_names
def select(input, dim, index):
    """The view at ``index`` along ``dim`` (that dimension is removed)."""
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    size = input._data.shape[dim]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(input._data.shape)} at dimension {dim}")
    key = (slice(None),) * dim + (int(index),)
    return _index_op(input, key, "select", dim_arg)


# Note [Multi-output views]
# -------------------------
# ``split``, ``chunk`` and ``unbind`` record ONE node with an output per piece, as PyTorch
# does: every piece's ``grad_fn`` is the same ``SplitBackward0`` (``SplitWithSizesBackward0``
# for a list of sizes, ``UnbindBackward0``) and its ``output_nr`` is its position. The node's
# backward receives one gradient per piece; an unused piece's gradient is None, which the
# rules below fill in with zeros themselves: the ops are declared ``fills_missing``, so the
# engine makes no zeros Tensor per unused piece (Note [Rules that fill missing gradients] in
# ``gradviz_ext/_ops.py``).
#
# The pieces are views of the input (same storage, same version counter, ``_base`` the root
# base), yet the ops are registered with ``view=False`` and made views here: the op table's
# view machinery derives one output from one input (``_view_chain``, and forward-mode AD
# replays a view op on the tangent expecting one result). Each piece's ``_view_chain`` ends
# instead in a single-output slice or select step that re-derives that piece alone. Pieces
# made with grad mode on are views of kind VIEW_MULTI_OUTPUT, which views of a piece inherit:
# PyTorch forbids modifying such a view in place when autograd would record the write, or
# using it after its base was modified in place (``_view_error`` in ``ops/_inplace.py``, Note
# [Views after their base changed] in ``gradviz_ext/_engine.py``).


def _piece_shape(shape, dim, size):
    """The shape of a piece of ``shape`` that has ``size`` entries along ``dim`` (None: the
    dim removed, as in unbind)."""
    return shape[:dim] + (() if size is None else (size,)) + shape[dim + 1:]


def _split_sections(size, split_size):
    """PyTorch's pieces for ``split(split_size)``: full chunks, the last possibly smaller,
    and always at least one piece (of size 0 for an empty dim)."""
    count = builtins.max(-(-size // split_size) if split_size else 1, 1)
    return (split_size,) * (count - 1) + (size - split_size * (count - 1),)


def _slices(a, dim, sections):
    lead = (slice(None),) * dim
    pieces, start = [], 0
    for length in sections:
        pieces.append(a[lead + (slice(start, start + length),)])
        start += length
    return tuple(pieces)


def _with_zeros(grads, ctx, sizes):
    """The per-piece gradients with None replaced by zeros (Tensors); None if all are None."""
    from ._creation import zeros

    present = next((g for g in grads if g is not None), None)
    if present is None:
        return None
    return [g if g is not None
            else zeros(*_piece_shape(ctx.shape, ctx.dim, size), dtype=present.dtype)
            for g, size in zip(grads, sizes)]


def _join_fast(grads, attrs, sizes):
    """The input's gradient array from the pieces' gradient arrays (None for a piece without
    one), or None when no piece has one: the pieces concatenated along ``dim`` (stacked when
    ``sizes`` is None, for unbind). With pieces missing, the present ones are written into one
    zeros array of the input's shape, so an unused piece costs nothing (Note [Rules that fill
    missing gradients] in gradviz_ext/_ops.py)."""
    present = None
    missing = False
    for g in grads:
        if g is None:
            missing = True
        elif present is None:
            present = g
    if present is None:
        return None
    dim = attrs["dim"]
    if not missing:
        if sizes is None:
            return np.stack(grads, axis=dim)
        return grads[0] if len(grads) == 1 else np.concatenate(grads, axis=dim)
    out = np.zeros(attrs["shape"], present.dtype)
    lead = (slice(None),) * dim
    start = 0
    for index, g in enumerate(grads):
        if sizes is None:
            if g is not None:
                out[lead + (index,)] = g
            continue
        size = sizes[index]
        if g is not None:
            out[lead + (slice(start, start + size),)] = g
        start += size
    return out


def _split_rules(sections_of):
    """The backward rules of a split op whose piece sizes are ``sections_of(attrs)``: the
    input's gradient is the pieces' gradients concatenated."""
    def backward(ctx, *grads):
        filled = _with_zeros(grads, ctx, sections_of(ctx.attrs))
        return (None if filled is None else cat(filled, ctx.dim),)

    def fast_backward(ctx, *grads):
        attrs = ctx.attrs
        return (_join_fast(grads, attrs, sections_of(attrs)),)

    return backward, fast_backward


def _split_sections_of(attrs):
    return _split_sections(attrs["shape"][attrs["dim"]], attrs["split_size"])


def _split_with_sizes_sections_of(attrs):
    return attrs["split_sizes"]


def _unbind_backward(ctx, *grads):
    filled = _with_zeros(grads, ctx, [None] * len(grads))
    return (None if filled is None else stack(filled, ctx.dim),)


def _unbind_fast(ctx, *grads):
    return (_join_fast(grads, ctx.attrs, None),)


def _unbind_forward(a, dim, shape, dim_arg=None):
    lead = (slice(None),) * dim
    return tuple(a[lead + (i, Ellipsis)] for i in range(shape[dim]))  # ...: 0-d views, not scalars


_split_backward, _split_fast = _split_rules(_split_sections_of)
_split_with_sizes_backward, _split_with_sizes_fast = _split_rules(_split_with_sizes_sections_of)

# view=False: the pieces are made views by _make_pieces_views (Note [Multi-output views])
SPLIT = Op("split", "SplitBackward0",
           forward=lambda a, dim, split_size, shape, dim_arg=None: (
               _slices(a, dim, _split_sections(shape[dim], split_size))),
           backward=_split_backward, fast_backward=_split_fast, quiet=False,
           fills_missing=True,
           saved={"dim": DIM, "split_size": Attr("split_size"),
               "self_sym_sizes": SELF_SIZES})
SPLIT_WITH_SIZES = Op("split_with_sizes", "SplitWithSizesBackward0",
                      forward=lambda a, dim, split_sizes, shape, dim_arg=None: _slices(a, dim, split_sizes),
                      backward=_split_with_sizes_backward, fast_backward=_split_with_sizes_fast,
                      quiet=False, fills_missing=True,
                      saved={"dim": DIM, "split_sizes": Attr("split_sizes", tuple),
                          "self_sym_sizes": SELF_SIZES})
# the same split, its pieces not tracked as views (torch's unsafe_split: LSTM/GRU cells' gates)
UNSAFE_SPLIT = Op("unsafe_split", "UnsafeSplitBackward0",
                  forward=lambda a, dim, split_size, shape: _slices(a, dim, _split_sections(shape[dim], split_size)),
                  backward=_split_backward, fast_backward=_split_fast, quiet=False,
                  fills_missing=True,
                  saved={"dim": DIM, "split_size": Attr("split_size"),
                      "self_sym_sizes": SELF_SIZES})
UNBIND = Op("unbind", "UnbindBackward0", forward=_unbind_forward, backward=_unbind_backward,
            fast_backward=_unbind_fast, quiet=False, fills_missing=True, saved={"dim": DIM})


def _make_pieces_views(input, pieces, steps):
    """Make ``pieces`` views of ``input``; ``steps[i]`` re-derives piece ``i`` from ``input``
    (Note [Multi-output views])."""
    from gradviz_ext import engine as _engine

    root = input if input._base is None else input._base
    for piece, step in zip(pieces, steps):
        piece._version_counter = input._version_counter
        piece._base = root
        piece._view_chain = input._view_chain + (step,)
        _engine.track_view(root, piece, input, _engine.VIEW_MULTI_OUTPUT)
    return pieces


def _check_splittable(input, what):
    if input.ndim == 0:
        raise RuntimeError(f"{what} expects at least a 1-dimensional tensor")


def _split_pieces(input, op, dim, sections, **attrs):
    shape = input._data.shape
    pieces = apply(op, input, dim=dim, shape=shape, **attrs)
    lead = (slice(None),) * dim
    steps, start = [], 0
    for length in sections:
        key = lead + (slice(start, start + length),)
        steps.append((_SLICE, {"key": key, "kind": "slice", "shape": shape}))
        start += length
    return _make_pieces_views(input, pieces, steps)


@declare(method=True)
def split(input, split_size_or_sections, dim=0):
    """Split ``input`` into views along ``dim``: chunks of ``split_size`` (the last may be
    smaller), or pieces of the given sizes. All pieces are outputs of one node.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.arange(5.0, requires_grad=True)
    >>> a, b, c = torch.split(x, 2)
    >>> c
    tensor([4.], grad_fn=<SplitBackward0>)
    >>> a.grad_fn is c.grad_fn, c.output_nr
    (True, 2)
    """
    _check_splittable(input, "split")
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    size = input._data.shape[dim]
    if isinstance(split_size_or_sections, (int, np.integer)) and not isinstance(split_size_or_sections, bool):
        split_size = int(split_size_or_sections)
        if split_size < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got split_size={split_size}")
        if split_size == 0 and size:
            raise RuntimeError(
                f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}")
        sections = _split_sections(size, split_size)
        return _split_pieces(input, SPLIT, dim, sections, split_size=split_size, dim_arg=dim_arg)
    if not isinstance(split_size_or_sections, (tuple, list)):
        raise TypeError(f"split_size_or_sections must be an int or a sequence of ints, not "
                        f"{type(split_size_or_sections).__name__}")
    sections = tuple(_int_arg(s, "split_sizes") for s in split_size_or_sections)
    if any(s < 0 for s in sections):
        raise RuntimeError(
            f"split_with_sizes expects split_sizes have only non-negative entries, but got "
            f"split_sizes={list(sections)}")
    if builtins.sum(sections) != size:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's "
            f"size at dimension {dim}), but got split_sizes={list(sections)}")
    return _split_pieces(input, SPLIT_WITH_SIZES, dim, sections, split_sizes=sections, dim_arg=dim_arg)


@declare(method=True)
def unsafe_split(input, split_size, dim=0):
    """``split`` into chunks of ``split_size`` whose pieces autograd does not track as views
    (one ``UnsafeSplitBackward0`` node): in-place changes to a piece are not checked against
    the others, as in PyTorch."""
    _check_splittable(input, "split")
    dim = _wrap_dim(dim, input.ndim)
    size = input._data.shape[dim]
    if split_size <= 0 and size:
        raise RuntimeError(
            f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}")
    pieces = apply(UNSAFE_SPLIT, input, dim=dim, split_size=split_size, shape=input._data.shape)
    return tuple(pieces) if isinstance(pieces, (tuple, list)) else (pieces,)


@declare(method=True)
def unsafe_chunk(input, chunks, dim=0):
    """``chunk`` through :func:`unsafe_split` (PyTorch's ``unsafe_chunk``)."""
    _check_splittable(input, "chunk")
    chunks = _int_arg(chunks, "chunks")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {int(chunks)}")
    size = input._data.shape[_wrap_dim(dim, input.ndim)]
    return unsafe_split(input, max(-(-size // chunks), 1), dim)


@declare(method=True)
@numpy_names
def chunk(input, chunks, dim=0):
    """Split into ``chunks`` nearly equal views (fewer if the size does not allow), as
    ``split`` with ``ceil(size / chunks)``: the pieces share one ``SplitBackward0`` node
    (``SplitWithSizesBackward0`` for an empty dim, as in PyTorch)."""
    _check_splittable(input, "chunk")
    chunks = _int_arg(chunks, "chunks")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {int(chunks)}")
    size = input._data.shape[_wrap_dim(dim, input.ndim)]
    split_size = -(-size // chunks)
    if split_size == 0 and size == 0:  # PyTorch keeps the count: `chunks` empty pieces
        return split(input, [0] * chunks, dim)
    return split(input, split_size, dim)


@declare(method=True)
@numpy_names
def unbind(input, dim=0):
    """The views ``input.select(dim, i)`` for every ``i``, outputs of one ``UnbindBackward0``."""
    if input.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    dim_arg, dim = dim, _wrap_dim(dim, input.ndim)
    shape = input._data.shape
    pieces = apply(UNBIND, input, dim=dim, shape=shape, dim_arg=dim_arg)
    lead = (slice(None),) * dim
    steps = [(_SELECT, {"key": lead + (i,), "kind": "select", "shape": shape})
             for i in range(shape[dim])]
    return _make_pieces_views(input, pieces, steps)


FLIP = Op("flip", "FlipBackward0",
          forward=lambda a, dims, dims_arg=None: np.flip(a, axis=dims).copy() if a.ndim else a.copy(),
          backward=lambda ctx, g: (flip(g, ctx.dims),), saved={"dims": DIMS})


@declare()
def flip(input, dims):
    """``input`` with the order of its entries reversed along ``dims``. Mirrors ``torch.flip``."""
    dims_arg = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    dims = check_distinct_dims(tuple(_wrap_dim(d, input.ndim) for d in dims_arg))
    return apply(FLIP, input, dims=dims, dims_arg=dims_arg)


@declare(name=False, method="flip")
def _flip_method(self, *dims, **kwargs):
    """``x.flip(dims)``, also as ``x.flip(0, 2)`` (the method takes the dims one by one too, as
    ``torch.Tensor.flip``)."""
    if "dims" in kwargs:
        return flip(self, kwargs.pop("dims"), **kwargs)
    return flip(self, dims[0] if len(dims) == 1 else dims, **kwargs)


__all__ = exports(globals(), "view", "squeeze_dim", "getitem", "contiguous", "unsafe_view")
